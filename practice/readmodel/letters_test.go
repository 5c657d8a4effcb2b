package readmodel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

// letterWorld is a firm's proposals and document store as their vendors
// hold them, and the updates their syncs have yet to bring (in any order,
// some more than once).
type letterWorld struct {
	rng     *rand.Rand
	base    time.Time
	version int64
	// engagements and documents are the vendors' current states; a
	// removed document is nil.
	engagements map[string]practice.Engagement
	documents   map[string]*practice.Document
	pending     []readmodel.Update
}

var letterClients = []string{"cli_a", "cli_b"}

func (w *letterWorld) day(n int) time.Time { return w.base.Add(time.Duration(n) * 24 * time.Hour) }

func (w *letterWorld) stamp() time.Time {
	w.version++
	return w.base.Add(200*24*time.Hour + time.Duration(w.version)*time.Minute)
}

func (w *letterWorld) send(k practice.Kind, id string, v any) {
	var raw json.RawMessage
	if v != nil {
		raw, _ = json.Marshal(v)
	}
	w.pending = append(w.pending, readmodel.Update{Kind: k, ID: id, Raw: raw, At: w.stamp()})
}

// change makes one change at a vendor: an engagement proposed or edited,
// a document filed, moved to another kind or client, or removed.
func (w *letterWorld) change() {
	at := w.stamp()
	switch w.rng.IntN(3) {
	case 0:
		id := fmt.Sprintf("eng_%d", w.rng.IntN(6))
		e, ok := w.engagements[id]
		if !ok {
			e = practice.Engagement{ID: id, Object: "engagement", Client: practice.Known(letterClients[w.rng.IntN(len(letterClients))]),
				Status: "proposed", Fee: practice.Money{Amount: "100.00", Currency: "GBP"}, Billing: "fixed",
				ReleasedJobs: []string{}, CreatedAt: practice.KnownAt(w.day(w.rng.IntN(120)))}
			if w.rng.IntN(6) == 0 {
				e.CreatedAt = nil // a quote without a date
			}
		}
		e.Scope = fmt.Sprintf("Accounts, edit %d", w.version)
		e.UpdatedAt, e.Version = at, practice.VersionAt(at)
		w.engagements[id] = e
		w.send(practice.Engagements, id, e)
	default:
		id := fmt.Sprintf("doc_%d", w.rng.IntN(10))
		if d, ok := w.documents[id]; ok && d != nil && w.rng.IntN(3) == 0 {
			w.documents[id] = nil
			w.send(practice.Documents, id, nil)
			return
		}
		if d, ok := w.documents[id]; ok && d == nil {
			return // ids are not given again
		}
		kinds := []string{practice.LetterKind, practice.SignedLetterKind, "tax_return"}
		d := &practice.Document{ID: id, Object: "document", Name: id + ".pdf",
			Kind: kinds[w.rng.IntN(len(kinds))], Client: practice.Known(letterClients[w.rng.IntN(len(letterClients))]),
			MimeType: "application/pdf", Location: practice.Location{Provider: "sharepoint", Path: "/", ItemID: id},
			FiledAt: w.day(w.rng.IntN(120)), UpdatedAt: at, Version: practice.VersionAt(at)}
		if old := w.documents[id]; old != nil {
			d.FiledAt = old.FiledAt
		}
		d.CreatedAt = d.FiledAt
		w.documents[id] = d
		w.send(practice.Documents, id, d)
	}
}

// wantLink is the invariant, written out apart from practice.LinkLetters:
// an engagement is linked to a letter of a kind iff the client has exactly
// one document of that kind filed within 30 days of its created_at, and no
// other engagement of the client is within 30 days of that document. An
// engagement without a date has no letter near it, and one beside it
// could be anywhere.
func wantLink(e practice.Engagement, docs []practice.Document, engs []practice.Engagement, kind string) string {
	near := func(a time.Time, b *time.Time) bool {
		if b == nil {
			return false
		}
		gap := a.Sub(*b)
		return gap <= 30*24*time.Hour && gap >= -30*24*time.Hour
	}
	var found []practice.Document
	for _, d := range docs {
		if d.Kind == kind && practice.ValueOf(d.Client) == practice.ValueOf(e.Client) && near(d.CreatedAt, e.CreatedAt) {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		return ""
	}
	for _, o := range engs {
		if o.ID != e.ID && practice.ValueOf(o.Client) == practice.ValueOf(e.Client) && (o.CreatedAt == nil || near(found[0].CreatedAt, o.CreatedAt)) {
			return ""
		}
	}
	return found[0].ID
}

func listLinked[T any](t *testing.T, m *readmodel.Model, k practice.Kind) []T {
	t.Helper()
	var out []T
	q := practice.Query{Limit: 3}
	for {
		page, err := m.List(context.Background(), live, k, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Items {
			var v T
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		if !page.HasMore {
			return out
		}
		q.Cursor = page.Next
	}
}

// checkLinks checks what m answers of every engagement against the
// documents m holds: listed and read alike, linked iff unambiguous.
func checkLinks(t *testing.T, m *readmodel.Model, name string, seed uint64, step int) {
	t.Helper()
	docs := listLinked[practice.Document](t, m, practice.Documents)
	engs := listLinked[practice.Engagement](t, m, practice.Engagements)
	for _, e := range engs {
		letter, signed := wantLink(e, docs, engs, practice.LetterKind), wantLink(e, docs, engs, practice.SignedLetterKind)
		if practice.ValueOf(e.LetterDocument) != letter || e.SignedDocument != signed {
			t.Fatalf("seed %d step %d, %s: %s of %s dated %s links %q/%q, want %q/%q (documents %v)", seed, step, name,
				e.ID, practice.ValueOf(e.Client), e.CreatedAt, practice.ValueOf(e.LetterDocument), e.SignedDocument, letter, signed, docs)
		}
		raw, err := m.Get(context.Background(), live, practice.Engagements, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		var one practice.Engagement
		if err := json.Unmarshal(raw, &one); err != nil {
			t.Fatal(err)
		}
		if practice.ValueOf(one.LetterDocument) != letter || one.SignedDocument != signed {
			t.Fatalf("seed %d step %d, %s: read of %s links %q/%q, listed %q/%q", seed, step, name,
				e.ID, practice.ValueOf(one.LetterDocument), one.SignedDocument, letter, signed)
		}
	}
}

func letterInstance(t *testing.T, st *readmodelsim.Store) *readmodel.Model {
	t.Helper()
	m := readmodel.New(readmodel.Config{Firm: firm, Store: st, Updates: st,
		Background: func(run func(context.Context)) { run(context.Background()) }})
	m.Serve(practice.Engagements, nil)
	m.Serve(practice.Documents, nil)
	if err := m.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return m
}

// Engagements and their clients' letters arrive at two instances in any
// order: late, repeated, removed, a letter moved to another kind or
// client, instances restarted. After every step each instance links an
// engagement to a letter iff that letter is the only one of its kind the
// client has within 30 days of the engagement's date, by the documents it
// holds; once every vendor state has arrived, by the vendor's documents.
func TestLettersLinkOnlyWhenUnambiguous(t *testing.T) {
	ctx := context.Background()
	linked := 0
	for seed := uint64(1); seed <= 300; seed++ {
		w := &letterWorld{rng: rand.New(rand.NewPCG(seed, 33)), base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
			engagements: map[string]practice.Engagement{}, documents: map[string]*practice.Document{}}
		st := readmodelsim.NewStore(nil)
		inst := []*readmodel.Model{letterInstance(t, st), letterInstance(t, st)}
		for step := range 120 {
			switch r := w.rng.IntN(10); {
			case r < 4:
				w.change()
			case r < 9 && len(w.pending) > 0:
				// Any pending update, to either instance; one in three
				// stays pending to arrive again.
				i := w.rng.IntN(len(w.pending))
				u := w.pending[i]
				if w.rng.IntN(3) != 0 {
					w.pending = append(w.pending[:i], w.pending[i+1:]...)
				}
				m := inst[w.rng.IntN(2)]
				var err error
				if u.Raw == nil {
					err = m.Remove(ctx, u.Kind, u.ID, u.At, func(json.RawMessage) error { return nil })
				} else {
					err = m.Apply(ctx, []readmodel.Update{u})
				}
				if err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
			case r == 9:
				i := w.rng.IntN(2)
				inst[i].Close()
				inst[i] = letterInstance(t, st)
			}
			for i, m := range inst {
				checkLinks(t, m, fmt.Sprintf("instance %d", i), seed, step)
			}
		}
		// Quiet: every vendor state arrives (as a reconciliation brings it).
		var vendorEngs []practice.Engagement
		for id, e := range w.engagements {
			vendorEngs = append(vendorEngs, e)
			raw, _ := json.Marshal(e)
			if err := inst[0].Apply(ctx, []readmodel.Update{{Kind: practice.Engagements, ID: id, Raw: raw}}); err != nil {
				t.Fatal(err)
			}
		}
		var docs []practice.Document
		for id, d := range w.documents {
			var err error
			if d == nil {
				err = inst[1].Remove(ctx, practice.Documents, id, w.stamp(), func(json.RawMessage) error { return nil })
			} else {
				docs = append(docs, *d)
				raw, _ := json.Marshal(d)
				err = inst[1].Apply(ctx, []readmodel.Update{{Kind: practice.Documents, ID: id, Raw: raw}})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		for i, m := range inst {
			if err := m.CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
			got := listLinked[practice.Engagement](t, m, practice.Engagements)
			if len(got) != len(w.engagements) {
				t.Fatalf("seed %d: instance %d holds %d engagements, the vendor %d", seed, i, len(got), len(w.engagements))
			}
			for _, e := range got {
				letter, signed := wantLink(w.engagements[e.ID], docs, vendorEngs, practice.LetterKind), wantLink(w.engagements[e.ID], docs, vendorEngs, practice.SignedLetterKind)
				if practice.ValueOf(e.LetterDocument) != letter || e.SignedDocument != signed {
					t.Fatalf("seed %d, quiet, instance %d: %s links %q/%q, want %q/%q", seed, i, e.ID,
						practice.ValueOf(e.LetterDocument), e.SignedDocument, letter, signed)
				}
				if letter != "" {
					linked++
				}
			}
		}
		for _, m := range inst {
			m.Close()
		}
	}
	if linked == 0 {
		t.Fatal("no schedule linked a letter: the schedules test nothing")
	}
	t.Logf("300 schedules, %d engagements linked at the end", linked)
}

// A firm's systems may keep their records in copies of their own (a
// document store connected beside the Caddyfile's records system): sharing
// the firm's letters, an engagement one copy holds links a letter another
// holds, and forgets it when that copy is let go, restarted alike.
func TestLettersLinkAcrossCopies(t *testing.T) {
	ctx := context.Background()
	st := readmodelsim.NewStore(nil)
	shared := practice.NewLetters()
	open := func(k practice.Kind) *readmodel.Model {
		m := readmodel.New(readmodel.Config{Firm: firm, Store: st, Updates: st, Letters: shared,
			Background: func(run func(context.Context)) { run(context.Background()) }})
		m.Serve(k, nil)
		if err := m.Load(ctx); err != nil {
			t.Fatal(err)
		}
		return m
	}
	records, documents := open(practice.Engagements), open(practice.Documents)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	put := func(m *readmodel.Model, k practice.Kind, id string, v any) {
		raw, _ := json.Marshal(v)
		if err := m.Apply(ctx, []readmodel.Update{{Kind: k, ID: id, Raw: raw}}); err != nil {
			t.Fatal(err)
		}
	}
	put(records, practice.Engagements, "eng_1", practice.Engagement{ID: "eng_1", Client: practice.Known("cli_1"), CreatedAt: &day, UpdatedAt: day, Version: 1})
	put(documents, practice.Documents, "doc_1", practice.Document{ID: "doc_1", Client: practice.Known("cli_1"), Kind: practice.LetterKind,
		CreatedAt: day.AddDate(0, 0, 2), UpdatedAt: day.AddDate(0, 0, 2), Version: 1})
	letter := func() string {
		t.Helper()
		raw, err := records.Get(ctx, live, practice.Engagements, "eng_1")
		if err != nil {
			t.Fatal(err)
		}
		var e practice.Engagement
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		return practice.ValueOf(e.LetterDocument)
	}
	if got := letter(); got != "doc_1" {
		t.Fatalf("the engagement links %q, want the other copy's letter doc_1", got)
	}
	documents.Close()
	if got := letter(); got != "" {
		t.Fatalf("the documents' copy let go, the engagement still links %q", got)
	}
	documents = open(practice.Documents)
	defer documents.Close()
	records.Close()
	records = open(practice.Engagements)
	defer records.Close()
	if got := letter(); got != "doc_1" {
		t.Fatalf("both copies opened again, the engagement links %q, want doc_1", got)
	}
}

func ref(id string) *string { return &id }
