package demo

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// firstPartner is the partner with the lowest id: new clients' owner.
func firstPartner(t *testing.T, r *Records, tn practice.Tenant) string {
	for _, p := range decodeAll[practice.Person](t, all(t, r, tn, practice.People, practice.Filter{}, 200)) {
		if p.Role == "partner" {
			return p.ID
		}
	}
	t.Fatal("no partner")
	return ""
}

func get[T any](t *testing.T, r *Records, tn practice.Tenant, k practice.Kind, id string) (T, json.RawMessage) {
	t.Helper()
	raw, err := r.Get(ctx, tn, k, id)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v, raw
}

func TestCreateClient(t *testing.T) {
	r, clock := openAcme(t)
	owner := idOf(t, all(t, r, acme, practice.People, practice.Filter{}, 200)[24])
	contacts := []practice.Contact{{Name: "Ada Shaw", Role: "primary", Email: "ada@shawjoinery.co.uk"}}
	for _, tc := range []struct {
		name   string
		tenant practice.Tenant
		in     practice.ClientInput
		want   practice.Client
	}{
		{"defaults", acme, practice.ClientInput{Name: ptr("Shaw Joinery Ltd")},
			practice.Client{Name: "Shaw Joinery Ltd", Type: "company", Status: "active", Country: "GB", Owner: firstPartner(t, r, acme), Contacts: []practice.Contact{}}},
		{"defaults follow the firm's country", birch, practice.ClientInput{Name: ptr("Shaw Joinery LLC")},
			practice.Client{Name: "Shaw Joinery LLC", Type: "company", Status: "active", Country: "US", Owner: firstPartner(t, r, birch), Contacts: []practice.Contact{}}},
		{"every field", acme, practice.ClientInput{Name: ptr("Ada Shaw"), Type: ptr("individual"), Status: ptr("prospect"),
			Owner: &owner, Email: ptr("ada@shawjoinery.co.uk"), Phone: ptr("+44 20 7946 0000"), Country: ptr("ie"), Contacts: &contacts},
			practice.Client{Name: "Ada Shaw", Type: "individual", Status: "prospect", Country: "IE", Owner: owner,
				Email: "ada@shawjoinery.co.uk", Phone: "+44 20 7946 0000", Contacts: contacts}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := r.CreateClient(ctx, tc.tenant, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			now := clock.last()
			var got practice.Client
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			if !validID("cli_", got.ID) || !idTime(t, got.ID).Equal(now) {
				t.Errorf("id %s at %v, want one made at %v", got.ID, idTime(t, got.ID), now)
			}
			want := tc.want
			want.ID, want.Object = got.ID, "client"
			want.CreatedAt, want.UpdatedAt, want.LastActivityAt = now, now, now
			want.Version = 1
			wantRaw, _ := practice.Marshal(want)
			if !bytes.Equal(raw, wantRaw) {
				t.Errorf("created\n%s\nwant\n%s", raw, wantRaw)
			}
			if stored, err := r.Get(ctx, tc.tenant, practice.Clients, got.ID); err != nil || !bytes.Equal(stored, raw) {
				t.Errorf("Get after create: %s, %v", stored, err)
			}
		})
	}
}

func TestUpdateClient(t *testing.T) {
	r, clock := openAcme(t)
	first := decodeAll[practice.Client](t, all(t, r, acme, practice.Clients, practice.Filter{}, 1))[0]
	raw, err := r.UpdateClient(ctx, acme, first.ID, practice.ClientInput{Phone: ptr("+44 20 7946 0123"), Country: ptr("ie")})
	if err != nil {
		t.Fatal(err)
	}
	var got practice.Client
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := first
	want.Phone, want.Country = "+44 20 7946 0123", "IE"
	want.UpdatedAt, want.LastActivityAt = clock.last(), clock.last()
	if first.Version != 1 {
		t.Errorf("a seeded client's version is %d, want 1", first.Version)
	}
	want.Version = 2 // one change after the seed
	wantRaw, _ := practice.Marshal(want)
	if !bytes.Equal(raw, wantRaw) {
		t.Errorf("updated\n%s\nwant\n%s", raw, wantRaw)
	}
}

func TestJobWrites(t *testing.T) {
	r, clock := openAcme(t)
	engs := decodeAll[practice.Engagement](t, all(t, r, acme, practice.Engagements, practice.Filter{}, 200))
	i := slices.IndexFunc(engs, func(e practice.Engagement) bool { return e.Status == "signed" })
	eng := engs[i]
	client, _ := get[practice.Client](t, r, acme, practice.Clients, practice.IDOf(eng.Client))
	people := decodeAll[practice.Person](t, all(t, r, acme, practice.People, practice.Filter{}, 200))

	raw, err := r.CreateJob(ctx, acme, practice.JobInput{Title: ptr("Year-end accounts 2026"), Type: ptr("Year-end accounts"),
		Client: &client.ID, Engagement: &eng.ID, Deadline: ptr("2026-12-31")})
	if err != nil {
		t.Fatal(err)
	}
	created := clock.last()
	var job practice.Job
	json.Unmarshal(raw, &job)
	want := practice.Job{ID: job.ID, Object: "job", Title: "Year-end accounts 2026", Type: "Year-end accounts", Client: client.ID,
		Engagement: eng.ID, Owner: client.Owner, Stage: "planned", Deadline: "2026-12-31", CreatedAt: created, UpdatedAt: created,
		Version: 1}
	if wantRaw, _ := practice.Marshal(want); !bytes.Equal(raw, wantRaw) {
		t.Errorf("created\n%s\nwant\n%s", raw, wantRaw)
	}
	// The engagement lists no job, as no proposal system links its jobs:
	// naming it on a job changes only the job.
	linked, _ := get[practice.Engagement](t, r, acme, practice.Engagements, eng.ID)
	if len(linked.ReleasedJobs) != 0 || linked.Version != eng.Version {
		t.Errorf("engagement after a job names it: %+v", linked)
	}

	owner := people[len(people)-1].ID
	raw, err = r.UpdateJob(ctx, acme, job.ID, practice.JobInput{Engagement: ptr(""), Owner: &owner, Deadline: ptr("2027-01-31")})
	if err != nil {
		t.Fatal(err)
	}
	want.Engagement, want.Owner, want.Deadline, want.UpdatedAt = "", owner, "2027-01-31", clock.last()
	want.Version++
	if wantRaw, _ := practice.Marshal(want); !bytes.Equal(raw, wantRaw) {
		t.Errorf("updated\n%s\nwant\n%s", raw, wantRaw)
	}
	unlinked, _ := get[practice.Engagement](t, r, acme, practice.Engagements, eng.ID)
	if len(unlinked.ReleasedJobs) != 0 || unlinked.Version != eng.Version {
		t.Errorf("engagement after the job names it no more: %+v", unlinked)
	}

	var closedAt time.Time
	for _, step := range []struct {
		stage  string
		closed func(now time.Time) *time.Time
	}{
		{"in_progress", func(time.Time) *time.Time { return nil }},
		{"in_progress", func(time.Time) *time.Time { return nil }}, // the same stage is still a move
		{"completed", func(now time.Time) *time.Time { closedAt = now; return &closedAt }},
		{"cancelled", func(time.Time) *time.Time { return &closedAt }}, // closed_at is when it first closed
		{"in_review", func(time.Time) *time.Time { return nil }},
	} {
		raw, err := r.MoveJob(ctx, acme, job.ID, practice.StageMove{Stage: step.stage, Note: "moved to " + step.stage})
		if err != nil {
			t.Fatal(err)
		}
		now := clock.last()
		want.Stage, want.UpdatedAt, want.ClosedAt = step.stage, now, step.closed(now)
		want.Version++ // every move is a change
		if wantRaw, _ := practice.Marshal(want); !bytes.Equal(raw, wantRaw) {
			t.Errorf("moved to %s\n%s\nwant\n%s", step.stage, raw, wantRaw)
		}
		out, err := r.ReadOutbox(0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if last := out[len(out)-1].Change; last.Note != "moved to "+step.stage || !bytes.Equal(last.After, raw) {
			t.Errorf("outbox after move to %s: %+v", step.stage, last)
		}
	}
}

func TestWriteValidation(t *testing.T) {
	r, _ := openAcme(t)
	clients := decodeAll[practice.Client](t, all(t, r, acme, practice.Clients, practice.Filter{}, 200))
	jobs := decodeAll[practice.Job](t, all(t, r, acme, practice.Jobs, practice.Filter{}, 200))
	engs := decodeAll[practice.Engagement](t, all(t, r, acme, practice.Engagements, practice.Filter{}, 200))
	birchPerson := idOf(t, all(t, r, birch, practice.People, practice.Filter{}, 1)[0])
	sandboxClient := idOf(t, all(t, r, acmeSandbox, practice.Clients, practice.Filter{}, 1)[0])
	nobody := "usr_" + strings.Repeat("0", 26)
	linked := jobs[slices.IndexFunc(jobs, func(j practice.Job) bool { return j.Engagement != "" })]
	other := clients[slices.IndexFunc(clients, func(c practice.Client) bool { return c.ID != linked.Client })].ID
	foreignEng := engs[slices.IndexFunc(engs, func(e practice.Engagement) bool { return practice.IDOf(e.Client) != clients[0].ID })].ID
	name, title := ptr("Shaw Joinery Ltd"), ptr("Bookkeeping")

	before, err := r.ReadOutbox(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		write       func() error
		code, param string
	}{
		{"client without a name", func() error { _, err := r.CreateClient(ctx, acme, practice.ClientInput{}); return err }, "parameter_missing", "name"},
		{"client of an unknown type", func() error {
			_, err := r.CreateClient(ctx, acme, practice.ClientInput{Name: name, Type: ptr("llama")})
			return err
		}, "parameter_invalid", "type"},
		{"client owned by nobody", func() error {
			_, err := r.CreateClient(ctx, acme, practice.ClientInput{Name: name, Owner: &nobody})
			return err
		}, "parameter_invalid", "owner"},
		{"client owned by another firm's person", func() error {
			_, err := r.UpdateClient(ctx, acme, clients[0].ID, practice.ClientInput{Owner: &birchPerson})
			return err
		}, "parameter_invalid", "owner"},
		{"client with a three-letter country", func() error {
			_, err := r.UpdateClient(ctx, acme, clients[0].ID, practice.ClientInput{Country: ptr("GBR")})
			return err
		}, "parameter_invalid", "country"},
		{"contact without a role", func() error {
			_, err := r.UpdateClient(ctx, acme, clients[0].ID, practice.ClientInput{Contacts: &[]practice.Contact{{Name: "Ada"}}})
			return err
		}, "parameter_missing", "contacts[0].role"},
		{"job without a title", func() error { _, err := r.CreateJob(ctx, acme, practice.JobInput{Client: &clients[0].ID}); return err }, "parameter_missing", "title"},
		{"job without a client", func() error { _, err := r.CreateJob(ctx, acme, practice.JobInput{Title: title}); return err }, "parameter_missing", "client"},
		{"job for an unknown client", func() error {
			_, err := r.CreateJob(ctx, acme, practice.JobInput{Title: title, Client: ptr("cli_" + strings.Repeat("0", 26))})
			return err
		}, "parameter_invalid", "client"},
		{"job for a sandbox client", func() error {
			_, err := r.CreateJob(ctx, acme, practice.JobInput{Title: title, Client: &sandboxClient})
			return err
		}, "parameter_invalid", "client"},
		{"job under another client's engagement", func() error {
			_, err := r.CreateJob(ctx, acme, practice.JobInput{Title: title, Client: &clients[0].ID, Engagement: &foreignEng})
			return err
		}, "parameter_invalid", "engagement"},
		{"job under an unknown engagement", func() error {
			_, err := r.CreateJob(ctx, acme, practice.JobInput{Title: title, Client: &clients[0].ID, Engagement: ptr("eng_" + strings.Repeat("0", 26))})
			return err
		}, "parameter_invalid", "engagement"},
		{"job moved to a client its engagement is not for", func() error {
			_, err := r.UpdateJob(ctx, acme, linked.ID, practice.JobInput{Client: &other})
			return err
		}, "parameter_invalid", "engagement"},
		{"job with a malformed deadline", func() error {
			_, err := r.UpdateJob(ctx, acme, jobs[0].ID, practice.JobInput{Deadline: ptr("31/01/2027")})
			return err
		}, "parameter_invalid", "deadline"},
		{"job owned by nobody", func() error {
			_, err := r.UpdateJob(ctx, acme, jobs[0].ID, practice.JobInput{Owner: &nobody})
			return err
		}, "parameter_invalid", "owner"},
		{"move to an unknown stage", func() error {
			_, err := r.MoveJob(ctx, acme, jobs[0].ID, practice.StageMove{Stage: "done"})
			return err
		}, "invalid_stage", "stage"},
		{"move without a stage", func() error { _, err := r.MoveJob(ctx, acme, jobs[0].ID, practice.StageMove{}); return err }, "parameter_missing", "stage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var inv *practice.InvalidError
			if err := tc.write(); !errors.As(err, &inv) || inv.Code != tc.code || inv.Param != tc.param {
				t.Errorf("err = %v, want %s on %s", err, tc.code, tc.param)
			}
		})
	}

	for _, tc := range []struct {
		name  string
		write func() error
	}{
		{"update an unknown client", func() error {
			_, err := r.UpdateClient(ctx, acme, "cli_"+strings.Repeat("0", 26), practice.ClientInput{Name: name})
			return err
		}},
		{"update another firm's client", func() error {
			_, err := r.UpdateClient(ctx, birch, clients[0].ID, practice.ClientInput{Name: name})
			return err
		}},
		{"update a live job in the sandbox", func() error {
			_, err := r.UpdateJob(ctx, acmeSandbox, jobs[0].ID, practice.JobInput{Title: title})
			return err
		}},
		{"move an unknown job", func() error {
			_, err := r.MoveJob(ctx, acme, "job_nope", practice.StageMove{Stage: "filed"})
			return err
		}},
		{"create for an unknown firm", func() error {
			_, err := r.CreateClient(ctx, practice.Tenant{Firm: "frm_unknown"}, practice.ClientInput{Name: name})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.write(); !errors.Is(err, practice.ErrNotFound) {
				t.Errorf("err = %v, want ErrNotFound", err)
			}
		})
	}

	// A rejected write leaves no trace.
	after, err := r.ReadOutbox(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("rejected writes added %d outbox entries", len(after)-len(before))
	}
	if got, _ := get[practice.Client](t, r, acme, practice.Clients, clients[0].ID); !got.UpdatedAt.Equal(clients[0].UpdatedAt) {
		t.Errorf("a rejected update changed the client")
	}
}

func TestWritesSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	clock := newClock(clockStart)
	db := openDB(t, dir)
	r := openRecords(t, db, []string{"frm_acme"}, withClock(clock.Now))
	job := idOf(t, all(t, r, acme, practice.Jobs, practice.Filter{}, 1)[0])

	client, err := r.CreateClient(ctx, acme, practice.ClientInput{Name: ptr("Shaw Joinery Ltd")})
	if err != nil {
		t.Fatal(err)
	}
	moved, err := r.MoveJob(ctx, acme, job, practice.StageMove{Stage: "in_review", Note: "Draft ready"})
	if err != nil {
		t.Fatal(err)
	}
	change, err := r.Trigger(ctx, "frm_acme", "invoice.raised")
	if err != nil {
		t.Fatal(err)
	}
	outbox, err := r.ReadOutbox(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openDB(t, dir)
	r = openRecords(t, db, []string{"frm_acme"}, withClock(clock.Now))
	for _, want := range []struct {
		tenant practice.Tenant
		kind   practice.Kind
		raw    json.RawMessage
	}{
		{acme, practice.Clients, client}, {acme, practice.Jobs, moved}, {acmeSandbox, practice.Invoices, change.After},
	} {
		got, err := r.Get(ctx, want.tenant, want.kind, idOf(t, want.raw))
		if err != nil || !bytes.Equal(got, want.raw) {
			t.Errorf("after reopening: %s, %v; want %s", got, err, want.raw)
		}
	}
	if n := len(all(t, r, acme, practice.Clients, practice.Filter{}, 200)); n != seedClients+1 {
		t.Errorf("%d clients after reopening, want %d", n, seedClients+1)
	}
	reread, err := r.ReadOutbox(0, 1000)
	if err != nil || len(reread) != len(outbox) {
		t.Errorf("outbox after reopening: %d entries, %v; want %d", len(reread), err, len(outbox))
	}
	// Invoice numbering continues where it stopped.
	next, err := r.Trigger(ctx, "frm_acme", "invoice.raised")
	if err != nil {
		t.Fatal(err)
	}
	var a, b practice.Invoice
	json.Unmarshal(change.After, &a)
	json.Unmarshal(next.After, &b)
	if minorNumber(a.Number)+1 != minorNumber(b.Number) {
		t.Errorf("invoice %s after %s", b.Number, a.Number)
	}
}

func minorNumber(n string) int {
	v := 0
	for _, c := range strings.TrimPrefix(n, "INV-") {
		v = v*10 + int(c-'0')
	}
	return v
}

func TestOutbox(t *testing.T) {
	r, clock := openAcme(t)
	signal := r.OutboxSignal()
	select {
	case <-signal:
		t.Fatal("signal before any write")
	default:
	}

	created, err := r.CreateClient(ctx, acme, practice.ClientInput{Name: ptr("Shaw Joinery Ltd")})
	if err != nil {
		t.Fatal(err)
	}
	createdAt := clock.last()
	select {
	case <-signal:
	default:
		t.Fatal("no signal after a write")
	}
	id := idOf(t, created)
	updated, err := r.UpdateClient(ctx, acme, id, practice.ClientInput{Name: ptr("Shaw & Daughters Joinery Ltd")})
	if err != nil {
		t.Fatal(err)
	}
	updatedAt := clock.last()
	jobID := idOf(t, all(t, r, acme, practice.Jobs, practice.Filter{}, 1)[0])
	_, jobBefore := get[practice.Job](t, r, acme, practice.Jobs, jobID)
	moved, err := r.MoveJob(ctx, acme, jobID, practice.StageMove{Stage: "in_review", Note: "Draft ready for review"})
	if err != nil {
		t.Fatal(err)
	}
	movedAt := clock.last()
	// Signals coalesce: two more writes leave one waiting.
	<-signal
	select {
	case <-signal:
		t.Error("a second signal was waiting")
	default:
	}

	entries, err := r.ReadOutbox(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []practice.Change{
		{Firm: "frm_acme", Kind: practice.Clients, ResourceID: id, Before: nil, After: created, OccurredAt: createdAt},
		{Firm: "frm_acme", Kind: practice.Clients, ResourceID: id, Before: created, After: updated, OccurredAt: updatedAt},
		{Firm: "frm_acme", Kind: practice.Jobs, ResourceID: jobID, Before: jobBefore, After: moved, Note: "Draft ready for review", OccurredAt: movedAt},
	}
	if len(entries) != len(want) {
		t.Fatalf("%d outbox entries, want %d", len(entries), len(want))
	}
	for i, e := range entries {
		if i > 0 && e.Seq <= entries[i-1].Seq {
			t.Errorf("seq %d after %d", e.Seq, entries[i-1].Seq)
		}
		if !validID("chg_", e.Change.ID) {
			t.Errorf("change id %q", e.Change.ID)
		}
		w := want[i]
		w.ID = e.Change.ID
		got, _ := practice.Marshal(e.Change)
		wantRaw, _ := practice.Marshal(w)
		if !bytes.Equal(got, wantRaw) {
			t.Errorf("entry %d\n%s\nwant\n%s", i, got, wantRaw)
		}
	}
	if entries[0].Change.Before != nil {
		t.Errorf("a created record's before is %q, want nil", entries[0].Change.Before)
	}

	if got, _ := r.ReadOutbox(entries[0].Seq, 1); len(got) != 1 || got[0].Seq != entries[1].Seq {
		t.Errorf("ReadOutbox(after first, 1) = %+v", got)
	}
	if err := r.DeleteOutbox(entries[1].Seq); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.ReadOutbox(0, 10); len(got) != 1 || got[0].Seq != entries[2].Seq {
		t.Errorf("after deleting two: %+v", got)
	}
	if got, _ := r.ReadOutbox(math.MaxUint64, 10); len(got) != 0 {
		t.Errorf("ReadOutbox(max) = %+v", got)
	}

	// A job that names an engagement changes the job alone: the engagement
	// lists no jobs, as on a firm's real systems.
	engs := decodeAll[practice.Engagement](t, all(t, r, acme, practice.Engagements, practice.Filter{}, 200))
	eng := engs[slices.IndexFunc(engs, func(e practice.Engagement) bool { return e.Status == "signed" })]
	job, err := r.CreateJob(ctx, acme, practice.JobInput{Title: ptr("Bookkeeping"), Client: eng.Client, Engagement: &eng.ID})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := r.ReadOutbox(entries[2].Seq, 10)
	if len(got) != 1 || got[0].Change.ResourceID != idOf(t, job) {
		t.Errorf("outbox after a job naming an engagement: %+v", got)
	}
}
