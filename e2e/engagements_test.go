package e2e

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
)

// signings follows the engagement.signed deliveries of rc by engagement.
func signings(rc *receiver) map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for _, d := range rc.wait(0, 0) {
		if d.envelope["event"] != "engagement.signed" {
			continue
		}
		data := d.envelope["data"].(map[string]any)
		out[data["engagement_id"].(string)] = append(out[data["engagement_id"].(string)], data)
	}
	return out
}

// checkEngagementPages reads /v1/engagements a page at a time and with
// updated_since, and returns them by id.
func checkEngagementPages(t *testing.T, g *gateway, tok string, want int, since time.Time, wantSince int) map[string]map[string]any {
	t.Helper()
	all := byID(pageAll(t, g, tok, "/v1/engagements", 2))
	if len(all) != want {
		t.Fatalf("%d engagements, want %d: %v", len(all), want, all)
	}
	recent := pageAll(t, g, tok, "/v1/engagements?updated_since="+url.QueryEscape(since.UTC().Format(time.RFC3339)), 1)
	if len(recent) != wantSince {
		t.Fatalf("%d engagements updated since %s, want %d: %v", len(recent), since, wantSince, recent)
	}
	return all
}

// TestXPMQuoteAcceptedIsOneSigning: a firm on Xero Practice Manager has
// its quotes as engagements; a quote accepted in XPM (noticed by polling:
// XPM sends no webhooks) reaches a subscriber as exactly one
// engagement.signed, however many polls read it after.
func TestXPMQuoteAcceptedIsOneSigning(t *testing.T) {
	f := startXPMFirm(t)
	now := time.Now().UTC().Truncate(time.Second)
	for i, st := range []string{"Draft", "Issued", "Issued", "Declined", "Accepted"} {
		f.x.AddQuote(vendortest.XPMQuote{ID: fmt.Sprintf("Q%06d", i), Name: fmt.Sprintf("Year-end accounts %d", i), State: st,
			ClientUUID: xpmClientID(i), Date: now.AddDate(0, 0, -7), Amount: "1500.00", Tax: "300.00",
			Tasks: []string{"Accounts preparation", "Corporation tax return"}})
	}
	g := f.gateway(t, "PRACTICEGW_SYNC_POLL=1s")
	waitSyncs(t, g, 20*time.Second, "every sync to be live", allLive)
	tok := g.issue("frm_marlowe", false, allReadWrite...).Token
	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "engagement.signed")
	rc.setSecrets(secret)

	engs := checkEngagementPages(t, g, tok, 5, now.Add(-time.Hour), 5)
	if e := engs["eng_Q000001"]; e["status"] != "sent" || e["client"] != "cli_"+xpmClientID(1) ||
		e["scope"] != "Year-end accounts 1: Accounts preparation, Corporation tax return" ||
		e["fee"].(map[string]any)["amount"] != "1800.00" || e["signed_at"] != nil || len(e["released_jobs"].([]any)) != 0 {
		t.Fatalf("issued quote: %v", e)
	}
	if e := engs["eng_Q000004"]; e["status"] != "signed" || e["signed_at"] == nil {
		t.Fatalf("accepted quote: %v", e)
	}
	// updated_since is to the second: the acceptance is read in a second
	// after every stamp of the backfill.
	after := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	eventually.True(t, 2*time.Second, 10*time.Millisecond, "the next second", func() bool { return time.Now().After(after) })

	f.x.EditQuote("Q000001", func(q *vendortest.XPMQuote) { q.State = "Accepted" })
	eventually.NoError(t, 15*time.Second, 20*time.Millisecond, "an engagement.signed for eng_Q000001", func() error {
		if len(signings(rc)["eng_Q000001"]) == 0 {
			return fmt.Errorf("signings: %v", signings(rc))
		}
		return nil
	})
	e := g.do(t, "GET", "/v1/engagements/eng_Q000001", tok, nil).json(t)
	if e["status"] != "signed" || e["signed_at"] == nil {
		t.Fatalf("eng_Q000001 after the poll: %v", e)
	}
	// Only the one accepted since: the quotes found by the backfill, the
	// one accepted before among them, raised nothing.
	recent := pageAll(t, g, tok, "/v1/engagements?updated_since="+url.QueryEscape(after.Format(time.RFC3339)), 1)
	if len(recent) != 1 || recent[0]["id"] != "eng_Q000001" {
		t.Fatalf("engagements updated since the acceptance: %v", recent)
	}

	// An edit of the accepted quote, and more polls, sign nothing again.
	f.x.EditQuote("Q000001", func(q *vendortest.XPMQuote) { q.Amount = "1600.00" })
	waitConfirmed(t, g, tok, "/v1/engagements", 2*time.Second)
	got := signings(rc)
	if len(got) != 1 || len(got["eng_Q000001"]) != 1 {
		t.Fatalf("engagement.signed deliveries by engagement, want one for eng_Q000001: %v", got)
	}
	d := got["eng_Q000001"][0]
	if d["client_id"] != "cli_"+xpmClientID(1) || d["released_jobs"] == nil || len(d["released_jobs"].([]any)) != 0 {
		t.Fatalf("signing: %v", d)
	}
}

// TestXeroQuoteAcceptedIsOneSigning: a firm on Karbon with a Xero ledger
// has its Xero quotes as engagements, their clients Karbon's; a quote
// marked accepted in Xero is one engagement.signed (and
// engagement_letter.signed, its alias, to an endpoint that listens for
// that name).
func TestXeroQuoteAcceptedIsOneSigning(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	quoteID := func(i int) string { return fmt.Sprintf("b1e2d3c4-0000-4000-8000-%012d", i) }
	v := startVendors(t, vendorOptions{contacts: 10, workItems: 10, setup: func(_ *vendortest.Karbon, x *vendortest.Xero) {
		for i, st := range []string{"DRAFT", "SENT", "SENT", "DECLINED", "INVOICED"} {
			x.AddQuote(vendortest.XeroQuote{QuoteID: quoteID(i), QuoteNumber: fmt.Sprintf("QU-%04d", i), Title: "Annual accounts",
				Status: st, ContactID: fmt.Sprintf("xc-%d", i), ContactName: fmt.Sprintf("Ann Client%03d", i),
				Date: now.AddDate(0, 0, -7), Expiry: now.AddDate(0, 0, 23), Lines: []string{"Statutory accounts", "Tax return"},
				Total: "2450.00", CurrencyCode: "GBP", Updated: now.Add(-time.Hour)})
		}
	}})
	g := v.gateway(t, "PRACTICEGW_SYNC_POLL=1s")
	waitSyncs(t, g, 20*time.Second, "every sync to be live", allLive)
	tok := g.issue("frm_hollis", false, allReadWrite...).Token
	rc, alias := newReceiver(t), newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "engagement.signed")
	rc.setSecrets(secret)
	_, secret = register(t, g, tok, alias.url(), "engagement_letter.signed")
	alias.setSecrets(secret)

	engs := checkEngagementPages(t, g, tok, 5, now.Add(-2*time.Hour), 5)
	clients := byID(pageAll(t, g, tok, "/v1/clients", 50))
	e := engs["eng_"+quoteID(1)]
	if e["status"] != "sent" || clients[e["client"].(string)] == nil || e["scope"] != "Annual accounts: Statutory accounts, Tax return" {
		t.Fatalf("sent quote (its client one of Karbon's): %v", e)
	}
	if engs["eng_"+quoteID(4)]["status"] != "ended" || engs["eng_"+quoteID(0)]["status"] != "proposed" {
		t.Fatalf("invoiced and draft quotes: %v", engs)
	}

	accepted := time.Now().UTC().Truncate(time.Millisecond)
	v.x.EditQuote(quoteID(1), accepted, func(q *vendortest.XeroQuote) { q.Status = "ACCEPTED" })
	eventually.NoError(t, 15*time.Second, 20*time.Millisecond, "an engagement.signed", func() error {
		if len(signings(rc)["eng_"+quoteID(1)]) == 0 || len(alias.wait(0, 0)) == 0 {
			return fmt.Errorf("signings %v, aliased %d", signings(rc), len(alias.wait(0, 0)))
		}
		return nil
	})
	// Taken back and accepted again in Xero, it is not signed twice.
	v.x.EditQuote(quoteID(1), accepted.Add(time.Second), func(q *vendortest.XeroQuote) { q.Status = "SENT" })
	waitConfirmed(t, g, tok, "/v1/engagements", 2*time.Second)
	v.x.EditQuote(quoteID(1), accepted.Add(2*time.Second), func(q *vendortest.XeroQuote) { q.Status = "ACCEPTED" })
	// Seen accepted again (a poll may come after the confirmation above),
	// and confirmed once more, so a second signing would have been sent.
	var signed map[string]any
	eventually.NoError(t, 15*time.Second, 50*time.Millisecond, "the engagement accepted again", func() error {
		signed = g.do(t, "GET", "/v1/engagements/eng_"+quoteID(1), tok, nil).json(t)
		if signed["status"] != "signed" {
			return fmt.Errorf("status %v", signed["status"])
		}
		return nil
	})
	waitConfirmed(t, g, tok, "/v1/engagements", 2*time.Second)
	got := signings(rc)
	if len(got) != 1 || len(got["eng_"+quoteID(1)]) != 1 {
		t.Fatalf("engagement.signed deliveries by engagement: %v", got)
	}
	d := got["eng_"+quoteID(1)][0]
	if d["client_id"] != e["client"] || len(d["released_jobs"].([]any)) != 0 {
		t.Fatalf("signing: %v", d)
	}
	if a := alias.wait(0, 0); len(a) != 1 || a[0].envelope["event"] != "engagement_letter.signed" {
		t.Fatalf("aliased deliveries: %v", a)
	}
	// Times are RFC 3339 to at most the millisecond: 49.220 reads 49.22.
	if at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(signed["signed_at"])); err != nil || !at.Equal(accepted) {
		t.Fatalf("signed engagement (signed_at the first accepted state's UpdatedDateUTC %s): %v", accepted, signed)
	}
}
