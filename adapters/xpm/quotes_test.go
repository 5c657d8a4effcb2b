package xpm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/adapters/xpm"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// addQuotes gives the practice 6 quotes: a draft, two issued, an
// accepted estimate, a declined one and an archived one of last year.
func addQuotes(x *vendortest.XPM) {
	for i, st := range []string{"Draft", "Issued", "Issued", "Accepted", "Declined", "Archived"} {
		q := vendortest.XPMQuote{ID: fmt.Sprintf("Q%06d", i), Name: fmt.Sprintf("Year-end accounts %d", i), State: st,
			ClientUUID: clientID(i), Date: epoch.AddDate(0, 0, -10), Amount: "1500.00", Tax: "300.00",
			Tasks: []string{"Accounts preparation", "Corporation tax return"}}
		if st == "Accepted" {
			q.Type = "Estimate"
		}
		if st == "Archived" {
			q.Date = epoch.AddDate(0, -5, 0)
		}
		x.AddQuote(q)
	}
}

func TestQuotesAreEngagements(t *testing.T) {
	e := newEnv(t)
	addQuotes(e.x)
	ctx := context.Background()
	engs := decode[practice.Engagement](t, vendortest.ListAll(t, e.a, live, practice.Engagements, practice.Filter{}, 4))
	if len(engs) != 6 {
		t.Fatalf("%d engagements, want the 6 quotes", len(engs))
	}
	got := byID(engs, func(e practice.Engagement) string { return e.ID })
	want := map[string]string{"eng_Q000000": "proposed", "eng_Q000001": "sent", "eng_Q000003": "signed", "eng_Q000004": "declined", "eng_Q000005": "ended"}
	for id, st := range want {
		if got[id].Status != st {
			t.Errorf("%s: status %q, want %q", id, got[id].Status, st)
		}
	}
	one := got["eng_Q000001"]
	if practice.IDOf(one.Client) != "cli_"+clientID(1) || one.Scope != "Year-end accounts 1: Accounts preparation, Corporation tax return" ||
		one.Fee != (practice.Money{Amount: "1800.00", Currency: "GBP"}) || one.Billing != "fixed" || one.ReleasedJobs == nil ||
		len(one.ReleasedJobs) != 0 || one.SignedAt != nil || one.LetterDocument != "" || !one.CreatedAt.Equal(epoch.AddDate(0, 0, -10)) {
		t.Errorf("issued quote: %+v", one)
	}
	signed := got["eng_Q000003"]
	if signed.SignedAt == nil || !signed.SignedAt.Equal(epoch) || signed.Billing != "estimate" {
		t.Errorf("accepted estimate: %+v", signed)
	}

	// A quote read alone is the quote listed.
	raw, err := e.a.Get(ctx, live, practice.Engagements, "eng_Q000003")
	if err != nil {
		t.Fatal(err)
	}
	alone := decode[practice.Engagement](t, []json.RawMessage{raw})[0]
	if alone.Version != signed.Version || alone.Scope != signed.Scope || !alone.SignedAt.Equal(*signed.SignedAt) {
		t.Errorf("read alone %+v, listed %+v", alone, signed)
	}
	if _, err := e.a.Get(ctx, live, practice.Engagements, "eng_Q999999"); !errors.Is(err, practice.ErrNotFound) {
		t.Errorf("a quote XPM does not have: %v", err)
	}
	for _, r := range e.x.Requests() {
		if strings.Contains(r, "quote.api/") && !strings.Contains(r, "quote.api/get/") && !strings.Contains(r, "detailed=true") {
			t.Errorf("%s: the tasks make the scope, so every list is detailed", r)
		}
	}
}

// signed_at is when the quote was first read accepted, and stays so
// through later edits, a later acceptance taken back, and another
// adapter over the same state (a restart, another instance).
func TestSignedAtIsTheFirstAcceptanceSeen(t *testing.T) {
	state := changes.NewMemoryState()
	e := newEnv(t)
	addQuotes(e.x)
	ctx := context.Background()
	open := func() *xpm.Adapter {
		a, err := xpm.New(xpm.Config{Firm: "frm_acme", TenantID: e.x.TenantID, BaseURL: e.x.URL,
			OAuth2: upstream.OAuth2Config{AccessToken: e.x.Token}, Upstream: upstream.Policy{RateLimit: -1}},
			upstream.Deps{Clock: e.clock, State: state})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	first := open()
	read := func(a interface {
		Get(context.Context, practice.Tenant, practice.Kind, string) (json.RawMessage, error)
	}) practice.Engagement {
		t.Helper()
		raw, err := a.Get(ctx, live, practice.Engagements, "eng_Q000001")
		if err != nil {
			t.Fatal(err)
		}
		return decode[practice.Engagement](t, []json.RawMessage{raw})[0]
	}
	if got := read(first); got.Status != "sent" || got.SignedAt != nil {
		t.Fatalf("issued: %+v", got)
	}
	e.clock.Advance(time.Hour)
	accepted := e.clock.Now()
	e.x.EditQuote("Q000001", func(q *vendortest.XPMQuote) { q.State = "Accepted" })
	if got := read(first); got.Status != "signed" || got.SignedAt == nil || !got.SignedAt.Equal(accepted) || !got.UpdatedAt.Equal(accepted) {
		t.Fatalf("accepted: %+v", got)
	}
	e.clock.Advance(time.Hour)
	e.x.EditQuote("Q000001", func(q *vendortest.XPMQuote) { q.State, q.Amount = "Issued", "1600.00" })
	restarted := open()
	if got := read(restarted); got.Status != "sent" || got.SignedAt == nil || !got.SignedAt.Equal(accepted) {
		t.Fatalf("taken back, read after a restart: %+v", got)
	}
	e.clock.Advance(time.Hour)
	e.x.EditQuote("Q000001", func(q *vendortest.XPMQuote) { q.State = "Accepted" })
	if got := read(restarted); got.SignedAt == nil || !got.SignedAt.Equal(accepted) {
		t.Fatalf("accepted again: %+v", got)
	}
}

// A quote XPM answers that the contract cannot carry is the vendor's
// unusable answer, never a record with a guessed status.
func TestUnusableQuote(t *testing.T) {
	e := newEnv(t)
	e.x.AddQuote(vendortest.XPMQuote{ID: "Q000001", Name: "Accounts", State: "Pondering", ClientUUID: clientID(1), Date: epoch, Amount: "10"})
	_, err := e.a.Get(context.Background(), live, practice.Engagements, "eng_Q000001")
	var bad *upstream.MalformedError
	if !errors.As(err, &bad) {
		t.Fatalf("a quote in a state XPM does not publish: %v", err)
	}
}
