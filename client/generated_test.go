package client_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedClientsAreCurrent regenerates the clients from the document
// the test gateway serves, with the pinned generators, and fails on any
// difference from what is committed: the document (openapi.json), the Go
// client (client.gen.go) and the TypeScript client's types
// (typescript/src/schema.ts). go generate ./client makes them anew.
func TestGeneratedClientsAreCurrent(t *testing.T) {
	served, err := gateway.Get("/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	doc := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(doc, served, 0o644); err != nil {
		t.Fatal(err)
	}
	same(t, "openapi.json", doc)

	gen := filepath.Join(dir, "client.gen.go")
	if out, err := exec.Command("go", "tool", "oapi-codegen", "-config", "oapi-codegen.yaml", "-o", gen, doc).CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, out)
	}
	same(t, "client.gen.go", gen)

	ts := filepath.Join(dir, "schema.ts")
	runTool(t, typescriptTool(t, "openapi-typescript"), doc, "--output", ts)
	same(t, filepath.Join("typescript", "src", "schema.ts"), ts)
}

// same fails the test when the committed file differs from the one made.
func same(t *testing.T, committed, made string) {
	t.Helper()
	want, err := os.ReadFile(made)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("client/%s is not what the generator makes of the document the gateway serves: run go generate ./client and commit the result", committed)
	}
}
