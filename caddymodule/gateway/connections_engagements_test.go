package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// engagementIDs are the engagements a firm's reads serve.
func engagementIDs(t *testing.T, a *App, firm string) ([]string, error) {
	t.Helper()
	page, err := a.firms[firm].Reader(practice.Engagements).List(context.Background(), practice.Tenant{Firm: firm}, practice.Engagements, practice.Query{Limit: 100})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, raw := range page.Items {
		var e struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(raw, &e)
		ids = append(ids, e.ID)
	}
	slices.Sort(ids)
	return ids, nil
}

// A ledger connected to a system that keeps proposals (a Xero
// organisation's quotes) keeps the firm's engagements under the rules a
// Caddyfile firm follows: a Karbon records connection keeps none, so once
// the Xero ledger is connected the engagements are Xero's quotes, the
// records connection reopened without them; when the ledger is
// disconnected they go back to the records system, and the quotes'
// copy is purged.
func TestLedgerConnectionKeepsTheFirmsEngagements(t *testing.T) {
	w := newWorld(t, "frm_demo", "frm_beta")
	var want []string
	for i := range 3 {
		id := fmt.Sprintf("b1e2d3c4-0000-4000-8000-%012d", i)
		want = append(want, "eng_"+id)
		w.xero.AddQuote(vendortest.XeroQuote{QuoteID: id, QuoteNumber: fmt.Sprintf("QU-%04d", i), Title: "Annual accounts",
			Status: "SENT", ContactID: "a3675fc4-f8dd-4f03-ba5b-f1870566bcd7", ContactName: "Barney Rubble",
			Date: time.Now().AddDate(0, 0, -7), Expiry: time.Now().AddDate(0, 0, 23), Lines: []string{"Accounts"},
			Total: "100.00", CurrencyCode: "GBP", Updated: time.Now().Add(-time.Hour)})
	}
	a := w.instance()
	k := w.connectKarbon("frm_beta")
	step(t, a)
	waitFor(t, "the records backfill", func() bool { return backfilled(a, k) })
	records := a.firms["frm_beta"].conns.Load().byRole["records"]
	if !slices.Contains(records.kinds, practice.Engagements) {
		t.Fatalf("Karbon alone: the records connection serves %v, want the engagements too", records.kinds)
	}
	if ids, err := engagementIDs(t, a, "frm_beta"); err != nil || len(ids) != 0 {
		t.Fatalf("Karbon alone: engagements %v %v, want none", ids, err)
	}

	x := w.connectXero("frm_beta")
	step(t, a)
	set := a.firms["frm_beta"].conns.Load()
	if set.engagements != "ledger" || slices.Contains(set.byRole["records"].kinds, practice.Engagements) ||
		!slices.Contains(set.byRole["ledger"].kinds, practice.Engagements) {
		t.Fatalf("with the Xero ledger: engagements from %q, records %v, ledger %v", set.engagements,
			set.byRole["records"].kinds, set.byRole["ledger"].kinds)
	}
	waitFor(t, "the ledger backfill", func() bool { return backfilled(a, x) })
	if ids, err := engagementIDs(t, a, "frm_beta"); err != nil || !slices.Equal(ids, want) {
		t.Fatalf("with the Xero ledger: engagements %v %v, want the quotes %v", ids, err, want)
	}
	if r := a.firms["frm_demo"].Reader(practice.Engagements); r != a.firms["frm_demo"].records {
		t.Fatalf("the demo firm's engagements are read from %T, want its demo records", r)
	}

	w.conns.change(t, x.ID, func(c *connection.Connection) { c.Status = connection.Disconnected })
	gone, _ := w.conns.Connection(context.Background(), x.ID)
	if err := a.Purge(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	step(t, a)
	if n := w.stored("frm_beta", []practice.Kind{practice.Engagements}); n != 0 {
		t.Fatalf("the disconnected ledger's quotes: %d kept in the store", n)
	}
	set = a.firms["frm_beta"].conns.Load()
	if set.engagements != "records" || !slices.Contains(set.byRole["records"].kinds, practice.Engagements) {
		t.Fatalf("the ledger disconnected: engagements from %q, records %v", set.engagements, set.byRole["records"].kinds)
	}
	if ids, err := engagementIDs(t, a, "frm_beta"); err != nil || len(ids) != 0 {
		t.Fatalf("the ledger disconnected: engagements %v %v, want none", ids, err)
	}
}
