// Command practicegw-vendors serves the vendor doubles the tests use
// (adapters/vendortest) on local ports with a little seeded data, each
// with its consent page, so that practicegw's connections can be tried on
// a laptop without a vendor account: run it beside
// `practicegw run --config config/try-connections.Caddyfile`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/practicegw/practicegw/adapters/vendortest"
)

func main() {
	host := flag.String("host", "127.0.0.1", "the address the doubles listen on")
	port := flag.Int("port", vendortest.FirstPort, "the first port: Karbon, then Xero, Microsoft Graph, Google Drive, Dropbox and QuickBooks Online on the next ones")
	gateway := flag.String("gateway", "http://localhost:8080", "the gateway's public_url, whose /connect/callback the consent pages return to")
	state := flag.String("state", filepath.Join("data", "practicegw-vendors.json"), "the file what the doubles issue (grants and their tokens, Karbon's webhook subscriptions) is kept in across a restart; empty keeps nothing")
	unchecked := flag.Bool("unchecked", false, "print, when requests to the doubles go unchecked against the vendors' published descriptions (none is where they look), the one line that says so, and exit")
	flag.Parse()
	if *unchecked {
		if line := vendortest.Unchecked(); line != "" {
			fmt.Println(line)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, vendortest.LocalOptions{Host: *host, First: *port, Gateway: *gateway, State: *state}); err != nil {
		fmt.Fprintln(os.Stderr, "practicegw-vendors:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o vendortest.LocalOptions) error {
	l, err := vendortest.ServeLocal(o)
	if err != nil {
		return err
	}
	fmt.Printf("Serving the vendor doubles, each with its consent page, for a gateway at %s:\n\n", o.Gateway)
	for _, s := range l.Served {
		fmt.Printf("  %-40s %s   (%s)\n", s.Name, s.URL, strings.Join(s.Connect, ", "))
	}
	fmt.Printf("\nStart the gateway beside them: go run ./cmd/practicegw run --config config/try-connections.Caddyfile\n" +
		"then connect each system from the console's Systems page or with practicegw connect. Karbon sends its webhooks\n" +
		"for every change made through its API, as Karbon does.\n")
	if o.State != "" {
		fmt.Printf("What the doubles issue (grants, tokens, Karbon's webhook subscriptions) is kept in %s across a restart;\n"+
			"their records start again from the seed. Ctrl-C stops them.\n", o.State)
	} else {
		fmt.Printf("Nothing is kept across a restart: connections made need reconnecting. Ctrl-C stops them.\n")
	}
	<-ctx.Done()
	return l.Close()
}
