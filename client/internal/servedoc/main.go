// Command servedoc writes the OpenAPI document a practicegw gateway serves
// at /v1/openapi.json: it builds the module's binary, runs it on the
// root Caddyfile and asks. The clients are generated from what it writes
// (go generate in client/).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/practicegw/practicegw/internal/testgateway"
)

func main() {
	out := flag.String("o", "openapi.json", "the file to write the document to")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "servedoc:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	dir, err := os.MkdirTemp("", "practicegw-servedoc")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := testgateway.Build(dir)
	if err != nil {
		return err
	}
	g, err := testgateway.Start(testgateway.Options{Binary: bin, Dir: dir})
	if err != nil {
		return err
	}
	defer g.Stop()
	doc, err := g.Get("/v1/openapi.json")
	if err != nil {
		return err
	}
	return os.WriteFile(out, doc, 0o644)
}
