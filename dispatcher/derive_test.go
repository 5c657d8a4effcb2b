package dispatcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/practice"
)

var testAt = time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC)

func mkChange(id string, kind practice.Kind, before, after string) practice.Change {
	c := practice.Change{ID: id, Firm: "frm_acme", Kind: kind, OccurredAt: testAt}
	if before != "" {
		c.Before = json.RawMessage(before)
	}
	if after != "" {
		c.After = json.RawMessage(after)
	}
	return c
}

func TestDerive(t *testing.T) {
	const (
		client     = `{"id":"cli_1","object":"client","name":"Ada & Co","status":"active"}`
		clientEdit = `{"id":"cli_1","object":"client","name":"Ada & Co Ltd","status":"active"}`
		jobPlanned = `{"id":"job_1","object":"job","client":"cli_1","stage":"planned","title":"VAT"}`
		jobRetitle = `{"id":"job_1","object":"job","client":"cli_1","stage":"planned","title":"VAT Q1"}`
		jobReview  = `{"id":"job_1","object":"job","client":"cli_1","stage":"in_review"}`
		jobDone    = `{"id":"job_1","object":"job","client":"cli_1","stage":"completed"}`
		jobCancel  = `{"id":"job_1","object":"job","client":"cli_1","stage":"cancelled"}`
		engSent    = `{"id":"eng_1","object":"engagement","client":"cli_1","status":"sent","released_jobs":[]}`
		engSigned  = `{"id":"eng_1","object":"engagement","client":"cli_1","status":"signed","released_jobs":["job_1","job_2"]}`
		engEnded   = `{"id":"eng_1","object":"engagement","client":"cli_1","status":"ended","released_jobs":["job_1","job_2"]}`
		doc        = `{"id":"doc_1","object":"document","client":"cli_1","engagement":"eng_1","kind":"engagement_letter"}`
		docMoved   = `{"id":"doc_1","object":"document","client":"cli_1","kind":"signed_engagement_letter"}`
		invDraft   = `{"id":"inv_1","object":"invoice","client":"cli_1","status":"draft"}`
		invAwait   = `{"id":"inv_1","object":"invoice","client":"cli_1","status":"awaiting_approval"}`
		invIssued  = `{"id":"inv_1","object":"invoice","client":"cli_1","status":"issued"}`
		invPart    = `{"id":"inv_1","object":"invoice","client":"cli_1","status":"partially_paid"}`
		invPaid    = `{"id":"inv_1","object":"invoice","client":"cli_1","status":"paid","settled_via":"gocardless"}`
		invVoid    = `{"id":"inv_1","object":"invoice","client":"cli_1","status":"void"}`
		person     = `{"id":"usr_1","object":"person","name":"Grace"}`
	)
	tests := []struct {
		name          string
		kind          practice.Kind
		before, after string
		note          string
		want          []string
		// data holds fields every listed event's payload must carry.
		data map[string]any
	}{
		{"client created", practice.Clients, "", client, "", []string{ClientCreated}, map[string]any{"client_id": "cli_1"}},
		{"client updated", practice.Clients, client, clientEdit, "", []string{ClientUpdated}, map[string]any{"client_id": "cli_1"}},
		{"client republished unchanged", practice.Clients, client, "  " + client, "", nil, nil},
		{"job opened", practice.Jobs, "", jobPlanned, "", []string{JobOpened}, map[string]any{"job_id": "job_1", "client_id": "cli_1"}},
		{"job edited without a stage move", practice.Jobs, jobPlanned, jobRetitle, "", nil, nil},
		{"job stage changed", practice.Jobs, jobPlanned, jobReview, "ready for partner", []string{JobStageChanged},
			map[string]any{"job_id": "job_1", "previous_stage": "planned", "stage": "in_review", "note": "ready for partner"}},
		{"job completed", practice.Jobs, jobReview, jobDone, "", []string{JobStageChanged, JobClosed},
			map[string]any{"job_id": "job_1", "client_id": "cli_1"}},
		{"job cancelled", practice.Jobs, jobPlanned, jobCancel, "", []string{JobStageChanged, JobClosed}, map[string]any{"job_id": "job_1"}},
		{"closed job moved between closed stages", practice.Jobs, jobDone, jobCancel, "", []string{JobStageChanged}, map[string]any{"job_id": "job_1"}},
		{"job reopened", practice.Jobs, jobDone, jobReview, "", []string{JobStageChanged}, map[string]any{"previous_stage": "completed"}},
		{"engagement created", practice.Engagements, "", engSent, "", []string{EngagementCreated},
			map[string]any{"engagement_id": "eng_1", "client_id": "cli_1"}},
		{"engagement signed", practice.Engagements, engSent, engSigned, "", []string{EngagementSigned},
			map[string]any{"engagement_id": "eng_1", "client_id": "cli_1", "released_jobs": []any{"job_1", "job_2"}}},
		{"engagement created signed", practice.Engagements, "", engSigned, "", []string{EngagementCreated, EngagementSigned},
			map[string]any{"engagement_id": "eng_1"}},
		{"signed engagement ended", practice.Engagements, engSigned, engEnded, "", nil, nil},
		{"document filed", practice.Documents, "", doc, "", []string{DocumentFiled},
			map[string]any{"document_id": "doc_1", "client_id": "cli_1", "engagement_id": "eng_1"}},
		{"document edited", practice.Documents, doc, docMoved, "", nil, nil},
		{"draft invoice created", practice.Invoices, "", invDraft, "", nil, nil},
		{"draft awaits approval", practice.Invoices, invDraft, invAwait, "", nil, nil},
		{"invoice created issued", practice.Invoices, "", invIssued, "", []string{InvoiceRaised}, map[string]any{"invoice_id": "inv_1"}},
		{"draft issued", practice.Invoices, invDraft, invIssued, "", []string{InvoiceRaised}, map[string]any{"invoice_id": "inv_1"}},
		{"approved and issued", practice.Invoices, invAwait, invIssued, "", []string{InvoiceRaised}, map[string]any{"invoice_id": "inv_1"}},
		{"draft voided", practice.Invoices, invDraft, invVoid, "", nil, nil},
		{"invoice part paid", practice.Invoices, invIssued, invPart, "", nil, nil},
		{"invoice paid", practice.Invoices, invPart, invPaid, "", []string{InvoicePaid},
			map[string]any{"invoice_id": "inv_1", "settled_via": "gocardless"}},
		{"invoice created paid", practice.Invoices, "", invPaid, "", []string{InvoiceRaised, InvoicePaid}, map[string]any{"invoice_id": "inv_1"}},
		{"paid invoice edited", practice.Invoices, invPaid, invPaid, "", nil, nil},
		{"person created", practice.People, "", person, "", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mkChange("chg_"+strings.ReplaceAll(tt.name, " ", "_"), tt.kind, tt.before, tt.after)
			c.Note = tt.note
			evs, err := Derive(c)
			if err != nil {
				t.Fatalf("Derive: %v", err)
			}
			var kinds []string
			for _, ev := range evs {
				kinds = append(kinds, ev.Event)
			}
			if !slices.Equal(kinds, tt.want) {
				t.Fatalf("kinds = %v, want %v", kinds, tt.want)
			}
			for _, ev := range evs {
				if ev.Firm != "frm_acme" || ev.Sandbox || !ev.OccurredAt.Equal(testAt.Truncate(time.Millisecond)) {
					t.Errorf("%s: envelope fields %q %v %v", ev.Event, ev.Firm, ev.Sandbox, ev.OccurredAt)
				}
				if ev.ID != EventID(c.ID, ev.Event, testAt) {
					t.Errorf("%s: id %s is not derived from the change", ev.Event, ev.ID)
				}
				var data map[string]any
				if err := json.Unmarshal(ev.Data, &data); err != nil {
					t.Fatalf("%s: data: %v", ev.Event, err)
				}
				for k, want := range tt.data {
					if !reflect.DeepEqual(data[k], want) {
						t.Errorf("%s: data.%s = %#v, want %#v", ev.Event, k, data[k], want)
					}
				}
				var after any
				json.Unmarshal([]byte(tt.after), &after)
				if !reflect.DeepEqual(data["object"], after) {
					t.Errorf("%s: object = %v, want the record after the change", ev.Event, data["object"])
				}
			}
		})
	}
}

// A removal (after null) raises its kind's .deleted event, whose object is
// the tombstone: the id, deleted, when, and the version after the last.
func TestDeriveRemovals(t *testing.T) {
	for _, tc := range []struct {
		kind   practice.Kind
		before string
		event  string
		idName string
	}{
		{practice.Clients, `{"id":"cli_1","object":"client","name":"Ada","version":7}`, ClientDeleted, "client_id"},
		{practice.Jobs, `{"id":"job_1","object":"job","stage":"planned","version":3}`, JobDeleted, "job_id"},
		{practice.Documents, `{"id":"doc_1","object":"document","version":1767225600000}`, DocumentDeleted, "document_id"},
		{practice.Invoices, `{"id":"inv_1","object":"invoice","status":"paid","version":2}`, InvoiceDeleted, "invoice_id"},
		{practice.People, `{"id":"usr_1","object":"person","name":"Grace","version":1}`, PersonDeleted, "person_id"},
	} {
		var rec struct {
			ID      string `json:"id"`
			Version int64  `json:"version"`
		}
		json.Unmarshal([]byte(tc.before), &rec)
		for _, after := range []string{"null", ""} {
			c := mkChange("chg_rm_"+rec.ID, tc.kind, tc.before, after)
			c.ResourceID = rec.ID
			evs, err := Derive(c)
			if err != nil {
				t.Fatalf("%s: Derive: %v", tc.event, err)
			}
			if len(evs) != 1 || evs[0].Event != tc.event {
				t.Fatalf("%s (after %q): events %v, want one %s", tc.kind, after, evs, tc.event)
			}
			ev := evs[0]
			if ev.ID != EventID(c.ID, tc.event, testAt) || ev.ResourceID != rec.ID {
				t.Errorf("%s: id %s, resource %s: not derived from the change", tc.event, ev.ID, ev.ResourceID)
			}
			want := fmt.Sprintf(`{%q:%q,"object":{"id":%q,"object":%q,"deleted":true,"deleted_at":"2026-03-14T09:26:53.589Z","version":%d}}`,
				tc.idName, rec.ID, rec.ID, tc.kind.Singular(), rec.Version+1)
			if string(ev.Data) != want {
				t.Errorf("%s: data\n%s\nwant\n%s", tc.event, ev.Data, want)
			}
		}
	}
	// Without a resource id the removal names the record it had.
	c := mkChange("chg_rm", practice.Clients, `{"id":"cli_9","version":4}`, "null")
	if evs, err := Derive(c); err != nil || len(evs) != 1 || evs[0].ResourceID != "cli_9" {
		t.Fatalf("removal without a resource id: %v, %v", evs, err)
	}
	// What raises nothing: a removal of a kind with no removal event, or
	// of a record whose last state is unknown (no version to give).
	for name, c := range map[string]practice.Change{
		"engagement":  mkChange("chg_1", practice.Engagements, `{"id":"eng_1","version":2}`, "null"),
		"no before":   mkChange("chg_2", practice.Clients, "", "null"),
		"null before": mkChange("chg_3", practice.Clients, "null", "null"),
	} {
		if evs, err := Derive(c); err != nil || len(evs) != 0 {
			t.Errorf("%s: %v, %v; want nothing", name, evs, err)
		}
	}
	if _, err := Derive(mkChange("chg_4", practice.Jobs, `{"id":`, "null")); !errors.Is(err, ErrInvalidChange) {
		t.Errorf("unreadable before: %v, want ErrInvalidChange", err)
	}
}

func TestDeriveStageChangedCarriesEmptyNote(t *testing.T) {
	evs, err := Derive(mkChange("chg_1", practice.Jobs,
		`{"id":"job_1","stage":"planned"}`, `{"id":"job_1","stage":"in_progress"}`))
	if err != nil || len(evs) != 1 {
		t.Fatalf("Derive = %v, %v", evs, err)
	}
	if !strings.Contains(string(evs[0].Data), `"note":""`) {
		t.Errorf("data %s lacks an explicit note", evs[0].Data)
	}
}

func TestDeriveIsDeterministic(t *testing.T) {
	c := mkChange("chg_det", practice.Jobs, `{"id":"job_1","stage":"in_review"}`, `{"id":"job_1","stage":"completed"}`)
	a, err := Derive(c)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Derive(c)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("re-deriving changed the events:\n%v\n%v", a, b)
	}
	if a[0].ID == a[1].ID {
		t.Fatalf("two kinds share id %s", a[0].ID)
	}
	other := c
	other.ID = "chg_other"
	o, _ := Derive(other)
	if o[0].ID == a[0].ID {
		t.Fatalf("two changes share id %s", a[0].ID)
	}
}

func TestDeriveRefusesUnreadableChanges(t *testing.T) {
	for name, c := range map[string]practice.Change{
		"no id":          mkChange("", practice.Clients, "", `{"id":"cli_1"}`),
		"bad after":      mkChange("chg_1", practice.Clients, "", `{"id":`),
		"bad before":     mkChange("chg_1", practice.Clients, `[1,`, `{"id":"cli_1"}`),
		"after is array": mkChange("chg_1", practice.Jobs, "", `[1,2]`),
	} {
		if _, err := Derive(c); !errors.Is(err, ErrInvalidChange) {
			t.Errorf("%s: err = %v, want ErrInvalidChange", name, err)
		}
	}
}

func TestEventIDsSortByOccurrence(t *testing.T) {
	var ids []string
	var want []string
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, d := range []time.Duration{0, time.Millisecond, time.Second, 47 * time.Hour, 400 * 24 * time.Hour} {
		id := EventID("chg_"+string(rune('z'-i)), JobOpened, base.Add(d))
		want = append(want, id)
		ids = append(ids, id)
		if len(id) != len("evt_")+26 || strings.ToLower(id) != id {
			t.Fatalf("id %q is not evt_ + 26 lowercase characters", id)
		}
	}
	sort.Strings(ids)
	if !slices.Equal(ids, want) {
		t.Fatalf("ids do not sort by time: %v", ids)
	}
	if EventIDFloor(base.Add(time.Second)) > want[2] || EventIDFloor(base.Add(time.Second+time.Millisecond)) <= want[2] {
		t.Fatalf("EventIDFloor does not bound ids at millisecond precision")
	}
}

func TestEnvelopeIsTheContractShape(t *testing.T) {
	ev := Event{
		ID: "evt_01", Event: EngagementSigned, OccurredAt: testAt, Firm: "frm_acme",
		Data: json.RawMessage(`{"engagement_id":"eng_1","name":"A & B <Ltd>"}`), ResourceID: "eng_1",
	}
	body, err := ev.Envelope(EngagementLetterSign)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"evt_01","event":"engagement_letter.signed","occurred_at":"2026-03-14T09:26:53.589Z",` +
		`"firm":"frm_acme","sandbox":false,"data":{"engagement_id":"eng_1","name":"A & B <Ltd>"}}`
	if string(body) != want {
		t.Fatalf("envelope\n got %s\nwant %s", body, want)
	}
	var back Event
	if err := json.Unmarshal(body, &back); err != nil || back.ID != ev.ID || !back.OccurredAt.Equal(testAt.Truncate(time.Millisecond)) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

func TestEventTooLargeIsRefused(t *testing.T) {
	big := `{"id":"cli_1","name":"` + strings.Repeat("x", MaxPayload) + `"}`
	evs, err := Derive(mkChange("chg_big", practice.Clients, "", big))
	if !errors.Is(err, ErrInvalidChange) || !strings.Contains(err.Error(), "limited to") || evs != nil {
		t.Fatalf("Derive = %d events, %v", len(evs), err)
	}
	noFirm := mkChange("chg_1", practice.Clients, "", `{"id":"cli_1"}`)
	noFirm.Firm = ""
	if _, err := Derive(noFirm); !errors.Is(err, ErrInvalidChange) {
		t.Fatalf("Derive without a firm = %v", err)
	}
}

// A signing is one event whichever change shows it: the first acceptance,
// or the same acceptance given again after a vendor took it back (its
// signed_at the first one seen), derive one event id, which the event log
// records once; another signing time is another event.
func TestSigningIsOneEventAcrossChanges(t *testing.T) {
	const (
		sent     = `{"id":"eng_1","object":"engagement","client":"cli_1","status":"sent","released_jobs":[],"signed_at":null}`
		signed   = `{"id":"eng_1","object":"engagement","client":"cli_1","status":"signed","released_jobs":[],"signed_at":"2026-03-01T10:00:00.123Z"}`
		takeBack = `{"id":"eng_1","object":"engagement","client":"cli_1","status":"sent","released_jobs":[],"signed_at":"2026-03-01T10:00:00.123Z","version":3}`
		again    = `{"id":"eng_1","object":"engagement","client":"cli_1","status":"signed","released_jobs":[],"signed_at":"2026-03-01T10:00:00.123Z","version":4}`
		other    = `{"id":"eng_1","object":"engagement","client":"cli_1","status":"signed","released_jobs":[],"signed_at":"2026-03-02T10:00:00Z","version":5}`
	)
	signing := func(id, before, after string) Event {
		t.Helper()
		evs, err := Derive(practice.Change{ID: id, Firm: "frm_acme", Kind: practice.Engagements, ResourceID: "eng_1",
			Before: json.RawMessage(before), After: json.RawMessage(after), OccurredAt: testAt})
		if err != nil || len(evs) != 1 || evs[0].Event != EngagementSigned {
			t.Fatalf("%s: %v %v", id, evs, err)
		}
		return evs[0]
	}
	first, second := signing("chg_1", sent, signed), signing("chg_2", takeBack, again)
	at := time.Date(2026, 3, 1, 10, 0, 0, 123e6, time.UTC)
	if first.ID != second.ID || first.ID != SigningID("frm_acme", false, "eng_1", at) || !first.OccurredAt.Equal(at) {
		t.Errorf("one signing, two ids: %s %s (occurred %s)", first.ID, second.ID, first.OccurredAt)
	}
	if signing("chg_3", takeBack, other).ID == first.ID {
		t.Error("another signing time, the same event")
	}
}
