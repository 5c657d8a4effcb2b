package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/client"
	"github.com/practicegw/practicegw/internal/testgateway"
)

// The examples run against one real gateway (testdata/gateway.Caddyfile),
// started by TestMain: frm_acme's sandbox on demo records, and frm_hollis
// on a Karbon double from which work item W0003 was removed, so that its
// jobs list a tombstone.
var (
	gateway *testgateway.Gateway
	// gatewayURL is the gateway's base URL, http://127.0.0.1:port.
	gatewayURL string
	// sandboxToken is a pgw_test_ credential of frm_acme's sandbox.
	sandboxToken string
	// liveToken is a pgw_live_ credential of frm_hollis, on Karbon.
	liveToken string
	// limitedToken is a sandbox credential allowed one request a minute.
	limitedToken string
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "the clients' test gateway:", err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "practicegw-client")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	k := karbon()
	defer k.Close()
	bin, err := testgateway.Build(dir)
	if err != nil {
		return 0, err
	}
	caddyfile, err := filepath.Abs(filepath.Join("testdata", "gateway.Caddyfile"))
	if err != nil {
		return 0, err
	}
	gateway, err = testgateway.Start(testgateway.Options{Binary: bin, Caddyfile: caddyfile, Dir: dir, Env: []string{
		"TEST_KARBON_URL=" + k.URL, "TEST_KARBON_BEARER=" + k.Bearer, "TEST_KARBON_ACCESS_KEY=" + k.AccessKey,
		// The examples' webhook receivers listen on loopback.
		"PRACTICEGW_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8",
	}})
	if err != nil {
		return 0, err
	}
	defer gateway.Stop()
	gatewayURL = gateway.URL
	if err := issue(); err != nil {
		return 0, err
	}
	if err := removeW0003(k); err != nil {
		return 0, fmt.Errorf("%w\n%s", err, gateway.Logs())
	}
	return m.Run(), nil
}

// karbon is frm_hollis's Karbon: one user, six contacts, twelve work items.
func karbon() *vendortest.Karbon {
	epoch := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	k := vendortest.NewKarbon()
	k.AddUser(vendortest.KarbonUser{Id: "U1", Name: "Pat Partner", EmailAddress: "pat@hollis.example", Roles: []string{"Partner"}})
	for i := range 6 {
		k.AddContact(vendortest.KarbonContact{ContactKey: fmt.Sprintf("C%03d", i), FirstName: "Ann", LastName: fmt.Sprintf("Client%03d", i),
			ContactType: "Client", Email: fmt.Sprintf("ann%d@example.com", i), Country: "GB", OwnerKey: "U1", LastModified: epoch})
	}
	for i := range 12 {
		deadline := epoch.AddDate(0, 1, i).Format(time.RFC3339)
		k.AddWorkItem(vendortest.KarbonWorkItem{WorkItemKey: fmt.Sprintf("W%04d", i), Title: fmt.Sprintf("Year-end accounts %d", i),
			AssigneeKey: "U1", ClientKey: fmt.Sprintf("C%03d", i%6), ClientType: "Contact", StartDate: epoch.Format(time.RFC3339),
			DeadlineDate: &deadline, WorkType: "Accounts", PrimaryStatus: "InProgress"})
	}
	return k
}

func issue() error {
	rw := []string{"clients:read", "clients:write", "jobs:read", "jobs:write", "events:read", "webhooks:read", "webhooks:write"}
	var err error
	for _, c := range []struct {
		token *string
		cred  testgateway.Credential
	}{
		{&sandboxToken, testgateway.Credential{Firm: "frm_acme", Sandbox: true, Scopes: rw}},
		{&liveToken, testgateway.Credential{Firm: "frm_hollis", Scopes: []string{"jobs:read"}}},
		{&limitedToken, testgateway.Credential{Firm: "frm_acme", Sandbox: true, RateLimit: "1/m", Scopes: []string{"jobs:read"}}},
	} {
		if *c.token, err = gateway.Issue(c.cred); err != nil {
			return err
		}
	}
	return nil
}

// removeW0003 waits for frm_hollis's jobs to be copied from Karbon, removes
// W0003 there, asks for a reconciliation and waits for its tombstone.
func removeW0003(k *vendortest.Karbon) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.NewClientWithResponses(gatewayURL, client.WithToken(liveToken))
	if err != nil {
		return err
	}
	jobs := func(deleted bool) (records, tombstones int, err error) {
		for item, err := range client.All[client.JobOrTombstone](ctx, c.ListJobs, &client.ListJobsParams{IncludeDeleted: &deleted}) {
			if err != nil {
				return 0, 0, err
			}
			if _, ok := client.Tombstoned(item); ok {
				tombstones++
			} else {
				records++
			}
		}
		return records, tombstones, nil
	}
	if err := until(ctx, "Karbon's 12 jobs to be copied", func() (bool, error) {
		n, _, err := jobs(false)
		var apiErr *client.APIError
		if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusServiceUnavailable {
			return false, nil // still backfilling
		}
		return n == 12, err
	}); err != nil {
		return err
	}
	k.RemoveWorkItem("W0003")
	if out, err := gateway.CLI("sync", "resync", "--firm", "frm_hollis", "--system", "records"); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return until(ctx, "the reconciliation to find W0003 removed", func() (bool, error) {
		records, tombstones, err := jobs(true)
		return records == 11 && tombstones == 1, err
	})
}

// until polls done every 100 ms until it holds, fails or ctx ends.
func until(ctx context.Context, what string, done func() (bool, error)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}
