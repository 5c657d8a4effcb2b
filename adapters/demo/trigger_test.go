package demo

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/practicegw/practicegw/practice"
)

func TestTrigger(t *testing.T) {
	r, clock := openAcme(t)
	liveBefore := dump(t, r, acme)
	lastInvoice := loadedTenant(t, r, acmeSandbox).lastInvoice

	decode := func(t *testing.T, raw json.RawMessage, v any) {
		t.Helper()
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("%v in %s", err, raw)
		}
	}
	// sandboxDoc reads a document the trigger must have filed.
	sandboxDoc := func(t *testing.T, id string) practice.Document {
		d, _ := get[practice.Document](t, r, acmeSandbox, practice.Documents, id)
		return d
	}
	checkSigned := func(t *testing.T, c practice.Change) {
		var before, after practice.Engagement
		decode(t, c.Before, &before)
		decode(t, c.After, &after)
		if before.Status != "proposed" && before.Status != "sent" || after.Status != "signed" || after.SignedAt == nil ||
			!after.SignedAt.Equal(c.OccurredAt) {
			t.Errorf("signing moved %s to %s at %v", before.Status, after.Status, after.SignedAt)
		}
		// The change carries the engagement as its system would, with no
		// letter; a read links the signed letter filed now when it is the
		// client's only one within 30 days of the engagement's date.
		if after.LetterDocument != nil || after.SignedDocument != "" {
			t.Errorf("the change names letters: %s", c.After)
		}
		read, _ := get[practice.Engagement](t, r, acmeSandbox, practice.Engagements, after.ID)
		if read.SignedDocument != "" {
			if d := sandboxDoc(t, read.SignedDocument); d.Kind != "signed_engagement_letter" || practice.ValueOf(d.Client) != practice.ValueOf(after.Client) ||
				d.Engagement != "" || after.CreatedAt.Before(d.CreatedAt.AddDate(0, 0, -30)) {
				t.Errorf("signed document %+v", d)
			}
		}
		if after.ReleasedJobs == nil || len(after.ReleasedJobs) != 0 {
			t.Errorf("signing lists released jobs %v: no proposal system links them", after.ReleasedJobs)
		}
	}

	for _, tc := range []struct {
		event   string
		kind    practice.Kind
		created bool
		check   func(t *testing.T, c practice.Change)
	}{
		{"client.created", practice.Clients, true, func(t *testing.T, c practice.Change) {
			var cl practice.Client
			decode(t, c.After, &cl)
			if cl.Status != "active" || len(cl.Contacts) == 0 || cl.Contacts[0].Role != "primary" || cl.Country != "GB" {
				t.Errorf("new client %+v", cl)
			}
		}},
		{"client.updated", practice.Clients, false, func(t *testing.T, c practice.Change) {
			var before, after practice.Client
			decode(t, c.Before, &before)
			decode(t, c.After, &after)
			if bytes.Equal(c.Before, c.After) || before.ID != after.ID || !after.LastActivityAt.Equal(c.OccurredAt) {
				t.Errorf("client edit\n%s\n%s", c.Before, c.After)
			}
		}},
		{"engagement.created", practice.Engagements, true, func(t *testing.T, c practice.Change) {
			var e practice.Engagement
			decode(t, c.After, &e)
			if e.Status != "proposed" || e.SignedAt != nil || e.Fee.Currency != "GBP" {
				t.Errorf("new engagement %+v", e)
			}
			// Proposed now with its letter filed now: a read links it
			// unless the client has another letter within 30 days.
			read, _ := get[practice.Engagement](t, r, acmeSandbox, practice.Engagements, e.ID)
			if read.LetterDocument != nil {
				if d := sandboxDoc(t, *read.LetterDocument); d.Kind != "engagement_letter" || practice.ValueOf(d.Client) != practice.ValueOf(e.Client) || d.Engagement != "" {
					t.Errorf("letter %+v", d)
				}
			}
		}},
		{"engagement.signed", practice.Engagements, false, checkSigned},
		{"engagement_letter.signed", practice.Engagements, false, checkSigned},
		{"job.opened", practice.Jobs, true, func(t *testing.T, c practice.Change) {
			var j practice.Job
			decode(t, c.After, &j)
			if j.Stage != "planned" || j.ClosedAt != nil || j.Deadline == "" {
				t.Errorf("new job %+v", j)
			}
		}},
		{"job.stage_changed", practice.Jobs, false, func(t *testing.T, c practice.Change) {
			var before, after practice.Job
			decode(t, c.Before, &before)
			decode(t, c.After, &after)
			if slices.Index(practice.JobStages, after.Stage) != slices.Index(practice.JobStages, before.Stage)+1 ||
				practice.ClosedStage(after.Stage) || c.Note == "" {
				t.Errorf("stage change %s -> %s, note %q", before.Stage, after.Stage, c.Note)
			}
		}},
		{"job.closed", practice.Jobs, false, func(t *testing.T, c practice.Change) {
			var before, after practice.Job
			decode(t, c.Before, &before)
			decode(t, c.After, &after)
			if practice.ClosedStage(before.Stage) || after.Stage != "completed" || after.ClosedAt == nil || c.Note == "" {
				t.Errorf("closing %s -> %s, closed_at %v, note %q", before.Stage, after.Stage, after.ClosedAt, c.Note)
			}
		}},
		{"document.filed", practice.Documents, true, func(t *testing.T, c practice.Change) {
			var d practice.Document
			decode(t, c.After, &d)
			if !slices.Contains(practice.DocumentKinds, d.Kind) || d.Location.Provider != "sharepoint" || !d.FiledAt.Equal(c.OccurredAt) {
				t.Errorf("new document %+v", d)
			}
		}},
		{"invoice.raised", practice.Invoices, true, func(t *testing.T, c practice.Change) {
			var inv practice.Invoice
			decode(t, c.After, &inv)
			if inv.Status != "issued" || minorNumber(practice.ValueOf(inv.Number)) != lastInvoice+1 || inv.AmountDue != inv.Total || inv.IssuedOn == "" {
				t.Errorf("new invoice %+v after number %d", inv, lastInvoice)
			}
		}},
		{"invoice.paid", practice.Invoices, false, func(t *testing.T, c practice.Change) {
			var before, after practice.Invoice
			decode(t, c.Before, &before)
			decode(t, c.After, &after)
			if before.Status != "issued" || after.Status != "paid" || after.AmountDue.Amount != "0.00" || after.PaidAt == nil ||
				!slices.ContainsFunc(uk.rails, func(w weighted[string]) bool { return w.value == after.SettledVia }) {
				t.Errorf("payment %+v", after)
			}
		}},
	} {
		t.Run(tc.event, func(t *testing.T) {
			c, err := r.Trigger(ctx, "frm_acme", tc.event)
			if err != nil {
				t.Fatal(err)
			}
			if c.Firm != "frm_acme" || !c.Sandbox || c.Kind != tc.kind || !c.OccurredAt.Equal(clock.last()) || !validID("chg_", c.ID) {
				t.Errorf("change %+v", c)
			}
			if (c.Before == nil) != tc.created || idOf(t, c.After) != c.ResourceID {
				t.Errorf("before %s, after %s", c.Before, c.After)
			}
			// The change is stored: the record reads back as the change left it
			// (an engagement with its letters linked as it is read), and the
			// change is the latest in the outbox.
			got, err := r.Get(ctx, acmeSandbox, c.Kind, c.ResourceID)
			if err == nil && c.Kind == practice.Engagements {
				var e practice.Engagement
				decode(t, got, &e)
				e.LetterDocument, e.SignedDocument = nil, ""
				got, err = json.Marshal(&e)
			}
			if err != nil || !bytes.Equal(got, c.After) {
				t.Errorf("Get after trigger: %s, %v", got, err)
			}
			out, err := r.ReadOutbox(0, 10000)
			if err != nil || out[len(out)-1].Change.ID != c.ID {
				t.Errorf("the change is not the outbox's latest entry: %v", err)
			}
			tc.check(t, c)
		})
	}

	if !bytes.Equal(dump(t, r, acme), liveBefore) {
		t.Error("triggers changed live records")
	}
}

// TestTriggerWhenNothingIsOpen keeps signing and paying until no proposal or
// issued invoice is left; the trigger then makes one to act on.
func TestTriggerWhenNothingIsOpen(t *testing.T) {
	r, _ := openAcme(t)
	ts := loadedTenant(t, r, acmeSandbox)
	count := func(k practice.Kind, statuses ...string) (n int) {
		ts.mu.RLock()
		defer ts.mu.RUnlock()
		for _, e := range ts.col(k) {
			if slices.Contains(statuses, e.Status) {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		event    string
		kind     practice.Kind
		statuses []string
	}{
		{"engagement.signed", practice.Engagements, []string{"proposed", "sent"}},
		{"invoice.paid", practice.Invoices, []string{"issued"}},
	} {
		t.Run(tc.event, func(t *testing.T) {
			open := count(tc.kind, tc.statuses...)
			for i := range open + 2 {
				c, err := r.Trigger(ctx, "frm_acme", tc.event)
				if err != nil {
					t.Fatal(err)
				}
				if c.Before == nil {
					t.Fatalf("trigger %d: the change has no before", i)
				}
			}
			if n := count(tc.kind, tc.statuses...); n != 0 {
				t.Errorf("%d still open", n)
			}
		})
	}
}

func TestTriggerRejects(t *testing.T) {
	r, _ := openAcme(t)
	var inv *practice.InvalidError
	if _, err := r.Trigger(ctx, "frm_acme", "job.exploded"); !errors.As(err, &inv) || inv.Param != "event" {
		t.Errorf("unknown event: %v", err)
	}
	if _, err := r.Trigger(ctx, "frm_unknown", "job.opened"); !errors.Is(err, practice.ErrNotFound) {
		t.Errorf("unknown firm: %v", err)
	}
}
