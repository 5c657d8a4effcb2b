package dispatcher

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Derive reads records from upstream systems: whatever they hold, it must
// not panic, and what it raises must be well-formed envelopes.
func FuzzDerive(f *testing.F) {
	f.Add("jobs", `{"id":"job_1","stage":"planned"}`, `{"id":"job_1","stage":"completed","client":"cli_1"}`)
	f.Add("invoices", ``, `{"id":"inv_1","status":"paid","settled_via":"bacs"}`)
	f.Add("engagements", `null`, `{"id":"eng_1","status":"signed","released_jobs":null}`)
	f.Add("clients", `{"id":1}`, `{"id":"cli_\u0026"}`)
	f.Fuzz(func(t *testing.T, kind, before, after string) {
		c := practice.Change{ID: "chg_f", Firm: "frm_f", Kind: practice.Kind(kind),
			Before: json.RawMessage(before), After: json.RawMessage(after), OccurredAt: time.Unix(1e9, 0)}
		evs, err := Derive(c)
		if err != nil {
			return
		}
		for _, ev := range evs {
			if !isKind(ev.Event) {
				t.Fatalf("raised unknown kind %q", ev.Event)
			}
			body, err := ev.Envelope(ev.Event)
			if err != nil || !json.Valid(body) {
				t.Fatalf("envelope %q: %v", body, err)
			}
		}
	})
}

// Retry-After comes from receivers: any value stays within bounds.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "-1", "Fri, 13 Mar 2026 12:00:00 GMT", "9999999999999999999", " 7 "} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := retryAfter(v, now)
		if d < 0 || d > maxRetryAfter || (!ok && d != 0) {
			t.Fatalf("retryAfter(%q) = %s, %v", v, d, ok)
		}
	})
}
