package console

import (
	"strings"
	"testing"
)

// A sync's or connection's reason reads as words; the error text it came
// from is kept as its detail, shown a click away.
func TestReasonsReadAsWords(t *testing.T) {
	for text, want := range map[string]string{
		"karbon: listing Contacts: GET https://api.karbonhq.com/v3/Contacts?$top=100: 503 Service Unavailable": "The vendor is unavailable: the sync tries again.",
		"xero refused the refresh token (invalid_grant): the connection must be reconnected":                   "The vendor no longer accepts this connection's access: it needs to be reconnected.",
		"xero: GET https://api.xero.com/api.xro/2.0/Invoices: 429 Too Many Requests":                           "The vendor is limiting the gateway's requests: the sync waits, then goes on.",
		"sharepoint: reading the delta: context deadline exceeded":                                             "The vendor did not answer in time: the sync tries again.",
		"jobs not confirmed since 2026-11-27T10:00:00Z":                                                        "Jobs not confirmed since 2026-11-27T10:00:00Z.",
		"the connection waits to be reconnected":                                                               "The vendor no longer accepts this connection's access: it needs to be reconnected.",
		"dropbox: listing the folder: walking pages: the vendor's next link repeats":                           "The gateway's last call to the vendor failed: it tries again.",
	} {
		r := reasonOf(text)
		if r.Summary != want {
			t.Errorf("%q reads %q, want %q", text, r.Summary, want)
		}
		if strings.Contains(r.Summary, "http") || strings.Count(r.Summary, ": ") > 1 {
			t.Errorf("%q reads %q: a chain or a URL", text, r.Summary)
		}
		if r.Detail != "" && r.Detail != text {
			t.Errorf("%q keeps %q as its detail", text, r.Detail)
		}
	}
}
