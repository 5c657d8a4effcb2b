package readmodel

import (
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// A sync's or a connection's reason reads as one sentence about the
// vendor, by its name: never the chain it came from, a URL or the
// vendor's error code.
func TestReasonsReadAsSentences(t *testing.T) {
	for _, c := range []struct{ label, text, want string }{
		{"Karbon", "poll Karbon clients: karbon: list contacts: karbon/karbon/frm_hollis unavailable (retry after 29.899s): circuit breaker open",
			"Karbon failed several times in a row; the gateway pauses its calls, then tries again."},
		{"Karbon", "karbon: listing Contacts: GET https://api.karbonhq.com/v3/Contacts?$top=100: 503 Service Unavailable",
			"Karbon is unavailable; the sync tries again."},
		{"QuickBooks Online", "intuit refused the refresh token (invalid_grant): the connection must be reconnected",
			"QuickBooks Online no longer accepts this connection's grant; reconnect it."},
		{"QuickBooks Online", "QuickBooks refused a token just refreshed (AuthenticationFault): the connection must be reconnected",
			"QuickBooks Online no longer accepts this connection's grant; reconnect it."},
		{"Karbon", "Karbon refused the access key; reconnect with a new one",
			"Karbon no longer accepts this connection's access key; reconnect it with a new one."},
		{"Xero", "xero: GET https://api.xero.com/api.xro/2.0/Invoices: 429 Too Many Requests",
			"Xero is limiting the gateway's requests; the sync waits its turn, then goes on."},
		{"SharePoint", "sharepoint: reading the delta: context deadline exceeded", "SharePoint did not answer in time; the sync tries again."},
		{"Dropbox", "dropbox: listing the folder: walking pages: the vendor's next link repeats",
			"Dropbox's paging repeats a page the gateway already read, so the list cannot be read to its end; the sync tries again."},
		{"Karbon", `backfill Karbon clients: vendor paging repeats: the next page "c:/v3/Contacts?$skip=100" was already read`,
			"Karbon's paging repeats a page the gateway already read, so the list cannot be read to its end; the sync tries again."},
		{"Xero", "xero: list contacts: unexpected end of JSON input", "Xero answered with something the gateway cannot read; the sync tries again."},
		{"Karbon", "karbon: read client cli_c-C1: something else: entirely", "The gateway's last call to Karbon failed; the sync tries again."},
		{"Xero", "Xero did not complete the consent (server_error); reconnect to try again",
			"Xero did not complete the consent (server_error); reconnect to try again."},
		{"Xero", "consent denied at Xero", "Consent denied at Xero."},
		{"", "", ""},
	} {
		got := Plainly(c.label, c.text)
		if got != c.want {
			t.Errorf("%q reads %q, want %q", c.text, got, c.want)
		}
		if strings.Contains(got, "http") || strings.Contains(got, ": ") || strings.Contains(got, "invalid_grant") {
			t.Errorf("%q reads %q: a chain, a URL or the vendor's code", c.text, got)
		}
	}
}

func TestStatusReasonNamesWhatIsNotLive(t *testing.T) {
	since := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	failing := Status{Label: "Karbon", System: "karbon", State: StateFailing,
		Why:   "clients: poll Karbon clients: karbon: list contacts: 503 Service Unavailable",
		Kinds: []KindStatus{{Kind: practice.Clients, State: StateFailing}, {Kind: practice.Jobs, State: StateLive}}}
	if got, want := failing.Reason(), "Karbon is unavailable; the sync tries again. It affects the clients; the rest is up to date."; got != want {
		t.Errorf("failing reads %q, want %q", got, want)
	}
	failing.Kinds[1].State = StateFailing
	if got, want := failing.Reason(), "Karbon is unavailable; the sync tries again."; got != want {
		t.Errorf("failing everywhere reads %q, want %q", got, want)
	}
	lagging := Status{Label: "Xero", State: StateLagging, Why: "invoices not confirmed since 2026-03-02T09:00:00Z",
		Kinds: []KindStatus{{Kind: practice.Invoices, State: StateLagging, ConfirmedAt: since}, {Kind: practice.Clients, State: StateLagging, ConfirmedAt: since.Add(time.Hour)}}}
	if got, want := lagging.Reason(), "Xero has not confirmed the invoices and clients since 09:00 UTC on 2 March 2026; the sync is behind and catches up on its next pass."; got != want {
		t.Errorf("lagging reads %q, want %q", got, want)
	}
	if got := (Status{State: StateLive, Why: "anything"}).Reason(); got != "" {
		t.Errorf("a live sync reads %q", got)
	}
}
