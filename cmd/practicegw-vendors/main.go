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
	"strings"
	"syscall"

	"github.com/practicegw/practicegw/adapters/vendortest"
)

func main() {
	host := flag.String("host", "127.0.0.1", "the address the doubles listen on")
	port := flag.Int("port", vendortest.FirstPort, "the first port: Karbon, then Xero, Microsoft Graph, Google Drive, Dropbox and QuickBooks Online on the next ones")
	gateway := flag.String("gateway", "http://localhost:8080", "the gateway's public_url, whose /connect/callback the consent pages return to")
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
	if err := run(ctx, *host, *port, *gateway); err != nil {
		fmt.Fprintln(os.Stderr, "practicegw-vendors:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, host string, port int, gateway string) error {
	l, err := vendortest.ServeLocal(host, port, gateway)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Printf("Serving the vendor doubles, each with its consent page, for a gateway at %s:\n\n", gateway)
	for _, s := range l.Served {
		fmt.Printf("  %-40s %s   (%s)\n", s.Name, s.URL, strings.Join(s.Connect, ", "))
	}
	fmt.Printf("\nStart the gateway beside them: go run ./cmd/practicegw run --config config/try-connections.Caddyfile\n" +
		"then connect each system from the console's Systems page or with practicegw connect. Ctrl-C stops them.\n")
	<-ctx.Done()
	return nil
}
