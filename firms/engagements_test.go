package firms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// engagementIDs are the engagements a firm's reads serve.
func engagementIDs(t *testing.T, a *Runtime, firm string) ([]string, error) {
	t.Helper()
	page, err := read(a, firm, practice.Engagements).List(context.Background(), practice.Tenant{Firm: firm}, practice.Engagements, practice.Query{Limit: 100})
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

// noEngagementsAnswered checks that a firm none of whose systems keeps
// proposals answers its engagements as none: an empty list as fresh as
// its records' copy (live, confirmed: the headers every kind of a real
// system answers with), and not found for one.
func noEngagementsAnswered(t *testing.T, a *Runtime, firm, when string) {
	t.Helper()
	if ids, err := engagementIDs(t, a, firm); err != nil || len(ids) != 0 {
		t.Fatalf("%s: engagements %v %v, want none", when, ids, err)
	}
	r := read(a, firm, practice.Engagements)
	fr, ok := r.(interface {
		Freshness(practice.Kind) (practice.Freshness, bool)
	})
	if !ok {
		t.Fatalf("%s: engagements read from %T, which says nothing of its freshness", when, r)
	}
	if f, ok := fr.Freshness(practice.Engagements); !ok || f.State != readmodel.StateLive || f.ConfirmedAt.IsZero() {
		t.Fatalf("%s: the engagements' freshness %+v %v, want live and confirmed", when, f, ok)
	}
	if _, err := r.Get(context.Background(), practice.Tenant{Firm: firm}, practice.Engagements, "eng_1"); !errors.Is(err, practice.ErrNotFound) {
		t.Fatalf("%s: an engagement read: %v, want not found", when, err)
	}
}

// A ledger connected to a system that keeps proposals (a Xero
// organisation's quotes) keeps the firm's engagements under the rules a
// Caddyfile firm follows. A Karbon records connection keeps none and
// never holds the kind: while the firm has no other system its
// engagements are none, answered from the records' copy; once the Xero
// ledger is connected they are Xero's quotes, and the records connection
// is left as it was (not reopened); when the ledger is disconnected they
// are none again, and the quotes' copy is purged.
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
	records := a.firms["frm_beta"].table.Load().conns["records"]
	if set := a.firms["frm_beta"].table.Load(); set.engagements != "none" || slices.Contains(records.kinds, practice.Engagements) {
		t.Fatalf("Karbon alone: engagements from %q, the records connection serves %v; want none, and no engagements", set.engagements, records.kinds)
	}
	noEngagementsAnswered(t, a, "frm_beta", "Karbon alone")

	x := w.connectXero("frm_beta")
	step(t, a)
	set := a.firms["frm_beta"].table.Load()
	if set.engagements != "ledger" || set.conns["records"] != records || slices.Contains(records.kinds, practice.Engagements) ||
		!slices.Contains(set.conns["ledger"].kinds, practice.Engagements) {
		t.Fatalf("with the Xero ledger: engagements from %q, records %v (reopened: %v), ledger %v", set.engagements,
			set.conns["records"].kinds, set.conns["records"] != records, set.conns["ledger"].kinds)
	}
	waitFor(t, "the ledger backfill", func() bool { return backfilled(a, x) })
	if ids, err := engagementIDs(t, a, "frm_beta"); err != nil || !slices.Equal(ids, want) {
		t.Fatalf("with the Xero ledger: engagements %v %v, want the quotes %v", ids, err, want)
	}
	if r := read(a, "frm_demo", practice.Engagements); r != practice.Reader(a.d.Demo) {
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
	set = a.firms["frm_beta"].table.Load()
	if set.engagements != "none" || set.conns["records"] != records {
		t.Fatalf("the ledger disconnected: engagements from %q, records reopened: %v", set.engagements, set.conns["records"] != records)
	}
	noEngagementsAnswered(t, a, "frm_beta", "the ledger disconnected")
}

// A firm whose Caddyfile names a records system that keeps no proposals
// (Karbon) has no sync that keeps engagements, so that a system of the
// firm that keeps them may: its engagements are none, answered from the
// records' copy as every firm on Karbon alone has always had them, with
// or without connections followed.
func TestCaddyfileRecordsThatKeepNoProposalsKeepNoEngagements(t *testing.T) {
	w := newWorld(t, "frm_beta")
	raw := json.RawMessage(fmt.Sprintf(`{"access_key":%q,"bearer":%q,"base_url":%q}`, w.karbon.AccessKey, w.karbon.Bearer, w.karbon.URL))
	a := w.instance(func(cfg *Config, d *Deps) {
		mod, err := d.Connected.(connect.Modules).Context.LoadModuleByID("practicegw.systems.records.karbon", raw)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Firms[0].Systems = []System{{Role: "records", Module: mod.(firmsystem.Module)}}
	})
	f := a.firms["frm_beta"]
	if f.keeping(practice.Engagements) != nil {
		t.Fatal("the Caddyfile's Karbon keeps the firm's engagements: no system connected later could")
	}
	a.Start()
	records := f.systems[0]
	waitFor(t, "the Karbon backfill", func() bool {
		f, ok := records.model.Freshness(practice.Clients)
		return ok && f.State == readmodel.StateLive
	})
	noEngagementsAnswered(t, a, f.ID, "Caddyfile Karbon")
	step(t, a)
	if set := f.table.Load(); set.engagements != "none" {
		t.Fatalf("followed: engagements from %q, want none", set.engagements)
	}
	noEngagementsAnswered(t, a, f.ID, "Caddyfile Karbon, connections followed")
}

// Purging a records connection that keeps no proposals, on an instance
// where it is not open, leaves the engagements the firm's ledger keeps:
// they were never the records system's.
func TestPurgingRecordsLeavesTheLedgersEngagements(t *testing.T) {
	w := newWorld(t, "frm_beta")
	for i := range 3 {
		w.xero.AddQuote(vendortest.XeroQuote{QuoteID: fmt.Sprintf("c1e2d3c4-0000-4000-8000-%012d", i), QuoteNumber: fmt.Sprintf("QU-%04d", i),
			Title: "Annual accounts", Status: "SENT", ContactID: "a3675fc4-f8dd-4f03-ba5b-f1870566bcd7", ContactName: "Barney Rubble",
			Date: time.Now().AddDate(0, 0, -7), Expiry: time.Now().AddDate(0, 0, 23), Lines: []string{"Accounts"},
			Total: "100.00", CurrencyCode: "GBP", Updated: time.Now().Add(-time.Hour)})
	}
	a := w.instance()
	k, x := w.connectKarbon("frm_beta"), w.connectXero("frm_beta")
	step(t, a)
	waitFor(t, "both backfills", func() bool { return backfilled(a, k) && backfilled(a, x) })
	if n := w.stored("frm_beta", []practice.Kind{practice.Engagements}); n != 3 {
		t.Fatalf("the ledger's quotes: %d stored, want 3", n)
	}
	// Disconnected and purged by an instance that never opened it.
	other := w.instance()
	w.conns.change(t, k.ID, func(c *connection.Connection) { c.Status = connection.Disconnected })
	gone, _ := w.conns.Connection(context.Background(), k.ID)
	if err := other.Purge(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	if n := w.stored("frm_beta", []practice.Kind{practice.Clients}); n != 0 {
		t.Fatalf("the records' clients: %d kept after the purge", n)
	}
	if n := w.stored("frm_beta", []practice.Kind{practice.Engagements}); n != 3 {
		t.Fatalf("the ledger's quotes after the records' purge: %d stored, want 3", n)
	}
}
