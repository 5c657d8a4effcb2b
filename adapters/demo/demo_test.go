package demo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/practice"
)

var update = flag.Bool("update", false, "rewrite testdata/seed-digests.txt")

// testClock is an injected clock that moves one second per reading, so
// that every write has its own, predictable time.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(start time.Time) *testClock { return &testClock{t: start} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// last is the time of the latest reading.
func (c *testClock) last() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

var clockStart = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func openDB(tb testing.TB, dir string) *bbolt.DB {
	tb.Helper()
	// NoSync: tests write thousands of times and never pull the plug.
	db, err := bbolt.Open(filepath.Join(dir, "practicegw.db"), 0o600, &bbolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func openRecords(tb testing.TB, db *bbolt.DB, firms []string, opts ...Option) *Records {
	tb.Helper()
	r, err := Open(db, firms, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// openAcme opens frm_acme and frm_birch with a test clock.
func openAcme(tb testing.TB) (*Records, *testClock) {
	tb.Helper()
	clock := newClock(clockStart)
	return openRecords(tb, openDB(tb, tb.TempDir()), []string{"frm_acme", "frm_birch"}, withClock(clock.Now)), clock
}

var (
	acme        = practice.Tenant{Firm: "frm_acme"}
	acmeSandbox = practice.Tenant{Firm: "frm_acme", Sandbox: true}
	birch       = practice.Tenant{Firm: "frm_birch"}
	ctx         = context.Background()
)

// all pages through a whole collection.
func all(tb testing.TB, r *Records, t practice.Tenant, k practice.Kind, f practice.Filter, limit int) []json.RawMessage {
	tb.Helper()
	var out []json.RawMessage
	q := practice.Query{Filter: f, Limit: limit}
	for {
		p, err := r.List(ctx, t, k, q)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, p.Items...)
		if !p.HasMore {
			return out
		}
		q.Cursor = p.Next
	}
}

// decodeAll decodes raw records into T.
func decodeAll[T any](tb testing.TB, raws []json.RawMessage) []T {
	tb.Helper()
	out := make([]T, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

func dump(tb testing.TB, r *Records, t practice.Tenant) []byte {
	var b bytes.Buffer
	for _, k := range practice.Kinds {
		for _, raw := range all(tb, r, t, k, practice.Filter{}, 200) {
			b.Write(raw)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

func TestKindIndexFollowsKinds(t *testing.T) {
	for want, k := range practice.Kinds {
		if got, ok := kindIndex(k); !ok || got != want {
			t.Errorf("kindIndex(%s) = %d, %v; want %d", k, got, ok, want)
		}
	}
	if len(practice.Kinds) != numKinds {
		t.Errorf("numKinds = %d, want %d", numKinds, len(practice.Kinds))
	}
}

// TestSeedIsDeterministic opens the same firms in two places and compares
// every byte, then compares digests with testdata so that a seed that
// changes between Go versions or machines is caught too.
func TestSeedIsDeterministic(t *testing.T) {
	firms := []string{"frm_acme", "frm_birch", "frm_cedar"}
	start := time.Now()
	a := openRecords(t, openDB(t, t.TempDir()), firms)
	t.Logf("seeding three firms took %v", time.Since(start))
	b := openRecords(t, openDB(t, t.TempDir()), firms[1:]) // another order and set

	var digests []string
	for _, firm := range firms {
		for _, sandbox := range []bool{false, true} {
			tn := practice.Tenant{Firm: firm, Sandbox: sandbox}
			got := dump(t, a, tn)
			if firm != "frm_acme" {
				if other := dump(t, b, tn); !bytes.Equal(got, other) {
					t.Errorf("%s differs between two opens", tn)
				}
			}
			sum := sha256.Sum256(got)
			digests = append(digests, tn.String()+" "+hex.EncodeToString(sum[:]))
		}
	}

	path := filepath.Join("testdata", "seed-digests.txt")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.Join(digests, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	defer f.Close()
	var want []string
	for s := bufio.NewScanner(f); s.Scan(); {
		want = append(want, s.Text())
	}
	if !slices.Equal(digests, want) {
		t.Errorf("seed digests changed (a seed change changes every demo id; run with -update if intended):\ngot  %q\nwant %q", digests, want)
	}
}

func TestSeedSizes(t *testing.T) {
	r, _ := openAcme(t)
	want := map[practice.Kind]int{
		practice.People: 25, practice.Clients: seedClients, practice.Engagements: seedEngagements,
		practice.Jobs: seedJobs, practice.Documents: seedDocuments, practice.Invoices: seedInvoices,
	}
	for _, tn := range []practice.Tenant{acme, acmeSandbox, birch} {
		for k, n := range want {
			if got := len(all(t, r, tn, k, practice.Filter{}, 200)); got != n {
				t.Errorf("%s %s: %d records, want %d", tn, k, got, n)
			}
		}
	}
	if seedClients < 250 {
		t.Errorf("the contract promises at least 250 clients, the seed has %d", seedClients)
	}
}

// idTime reads the creation time back out of an id.
func idTime(tb testing.TB, id string) time.Time {
	tb.Helper()
	_, v, _ := strings.Cut(id, "_")
	var ms uint64
	for _, c := range v[:10] {
		ms = ms<<5 | uint64(strings.IndexRune(crockford, c))
	}
	return time.UnixMilli(int64(ms)).UTC()
}

// TestSeedIsCoherent checks that seeded records link up and read like a
// practice's: the properties that make the demo believable.
func TestSeedIsCoherent(t *testing.T) {
	r := openRecords(t, openDB(t, t.TempDir()), []string{"frm_acme", "frm_birch", "frm_cedar"})
	for _, tc := range []struct {
		tenant             practice.Tenant
		currency, country  string
		provider, urlStart string
		jobType            string
	}{
		{acme, "GBP", "GB", "sharepoint", "https://acme.sharepoint.com/sites/Clients/", "VAT return (Q2)"},
		{acmeSandbox, "GBP", "GB", "sharepoint", "https://acme.sharepoint.com/sites/Clients/", "Self Assessment 2025-26"},
		{birch, "USD", "US", "google_drive", "https://drive.google.com/file/d/", "Form 1040"},
		{practice.Tenant{Firm: "frm_cedar"}, styleFor("frm_cedar").currency, styleFor("frm_cedar").code, "dropbox", "https://www.dropbox.com/home/Clients/", "Bookkeeping"},
	} {
		t.Run(tc.tenant.String(), func(t *testing.T) {
			people := decodeAll[practice.Person](t, all(t, r, tc.tenant, practice.People, practice.Filter{}, 200))
			clients := decodeAll[practice.Client](t, all(t, r, tc.tenant, practice.Clients, practice.Filter{}, 200))
			engs := decodeAll[practice.Engagement](t, all(t, r, tc.tenant, practice.Engagements, practice.Filter{}, 200))
			jobs := decodeAll[practice.Job](t, all(t, r, tc.tenant, practice.Jobs, practice.Filter{}, 200))
			docs := decodeAll[practice.Document](t, all(t, r, tc.tenant, practice.Documents, practice.Filter{}, 200))
			invoices := decodeAll[practice.Invoice](t, all(t, r, tc.tenant, practice.Invoices, practice.Filter{}, 200))

			checkTimes := func(id string, created, updated time.Time) {
				t.Helper()
				if !idTime(t, id).Equal(created) {
					t.Errorf("%s: id time %v, created_at %v", id, idTime(t, id), created)
				}
				if updated.Before(created) || updated.After(seedBase) {
					t.Errorf("%s: updated_at %v outside [%v, %v]", id, updated, created, seedBase)
				}
			}

			personIDs := map[string]practice.Person{}
			roles := map[string]int{}
			for _, p := range people {
				checkTimes(p.ID, p.CreatedAt, p.UpdatedAt)
				personIDs[p.ID] = p
				roles[p.Role]++
				if !strings.HasSuffix(p.Email, "@"+styleFor(tc.tenant.Firm).domain) {
					t.Errorf("%s: email %s not at the firm's domain", p.ID, p.Email)
				}
			}
			for _, role := range []string{"partner", "manager", "senior", "associate", "admin"} {
				if roles[role] == 0 {
					t.Errorf("no %s among people", role)
				}
			}

			clientIDs := map[string]practice.Client{}
			statuses := map[string]int{}
			for _, c := range clients {
				checkTimes(c.ID, c.CreatedAt, c.UpdatedAt)
				clientIDs[c.ID] = c
				statuses[c.Status]++
				primaries := 0
				for _, ct := range c.Contacts {
					if ct.Role == "primary" {
						primaries++
					}
				}
				if primaries != 1 || len(c.Contacts) > 4 {
					t.Errorf("%s: %d contacts, %d primary", c.ID, len(c.Contacts), primaries)
				}
				if _, ok := personIDs[c.Owner]; !ok {
					t.Errorf("%s: owner %s is not a person", c.ID, c.Owner)
				}
				if c.Country != tc.country || !slices.Contains(practice.ClientTypes, c.Type) {
					t.Errorf("%s: country %s type %s", c.ID, c.Country, c.Type)
				}
				if c.LastActivityAt.Before(seedBase.AddDate(0, 0, -549)) || c.LastActivityAt.After(seedBase) {
					t.Errorf("%s: last activity %v not in the last 18 months", c.ID, c.LastActivityAt)
				}
			}
			if statuses["active"] < len(clients)/2 || len(statuses) != len(practice.ClientStatuses) {
				t.Errorf("client statuses %v", statuses)
			}

			docIDs := map[string]practice.Document{}
			docKinds := map[string]int{}
			for _, d := range docs {
				checkTimes(d.ID, d.CreatedAt, d.UpdatedAt)
				docIDs[d.ID] = d
				docKinds[d.Kind]++
				loc := d.Location
				if loc.Provider != tc.provider || !strings.HasPrefix(loc.WebURL, tc.urlStart) ||
					!strings.HasPrefix(loc.Path, "/Clients/"+clientIDs[practice.IDOf(d.Client)].Name+"/") || !strings.HasSuffix(loc.Path, "/") ||
					loc.ItemID == "" || (loc.DriveID == "") != (tc.provider == "dropbox") {
					t.Errorf("%s: location %+v", d.ID, loc)
				}
				if tc.provider == "sharepoint" && !strings.HasPrefix(loc.DriveID, "b!") {
					t.Errorf("%s: SharePoint drive id %s", d.ID, loc.DriveID)
				}
				if d.MimeType == "" || d.SizeBytes <= 0 {
					t.Errorf("%s: mime %q size %d", d.ID, d.MimeType, d.SizeBytes)
				}
			}
			for _, k := range practice.DocumentKinds {
				if docKinds[k] == 0 {
					t.Errorf("no %s documents", k)
				}
			}

			jobIDs := map[string]practice.Job{}
			stages := map[string]int{}
			sawType := false
			for _, j := range jobs {
				checkTimes(j.ID, j.CreatedAt, j.UpdatedAt)
				jobIDs[j.ID] = j
				stages[j.Stage]++
				sawType = sawType || j.Type == tc.jobType
				if _, ok := clientIDs[j.Client]; !ok {
					t.Errorf("%s: client %s missing", j.ID, j.Client)
				}
				if _, ok := personIDs[j.Owner]; !ok {
					t.Errorf("%s: owner %s missing", j.ID, j.Owner)
				}
				if (j.ClosedAt != nil) != practice.ClosedStage(j.Stage) {
					t.Errorf("%s: stage %s closed_at %v", j.ID, j.Stage, j.ClosedAt)
				}
				if j.Deadline < "2025-01-01" || j.Deadline > "2027-12-31" {
					t.Errorf("%s: deadline %s", j.ID, j.Deadline)
				}
			}
			if len(stages) != len(practice.JobStages) {
				t.Errorf("job stages %v", stages)
			}
			if !sawType {
				t.Errorf("no %q job", tc.jobType)
			}

			engStatuses := map[string]int{}
			lettered, signedLettered := 0, 0
			for _, e := range engs {
				checkTimes(e.ID, e.CreatedAt, e.UpdatedAt)
				engStatuses[e.Status]++
				if _, ok := clientIDs[practice.IDOf(e.Client)]; !ok {
					t.Errorf("%s: client %s missing", e.ID, practice.IDOf(e.Client))
				}
				// Letters link as a firm's real letters do: the client's
				// only one of its kind within 30 days of the engagement.
				if want := onlyLetter(docs, engs, e, "engagement_letter"); e.LetterDocument != want {
					t.Errorf("%s: letter %q, want %q", e.ID, e.LetterDocument, want)
				}
				if want := onlyLetter(docs, engs, e, "signed_engagement_letter"); e.SignedDocument != want {
					t.Errorf("%s: signed letter %q, want %q", e.ID, e.SignedDocument, want)
				}
				if e.LetterDocument != "" {
					lettered++
				}
				if e.SignedDocument != "" {
					signedLettered++
				}
				signed := e.Status == "signed" || e.Status == "ended"
				if signed != (e.SignedAt != nil) {
					t.Errorf("%s: status %s signed_at %v", e.ID, e.Status, e.SignedAt)
				}
				// As the proposal systems give them: a quote's total, fixed
				// or an estimate, its title and tasks, no jobs linked.
				if e.Fee.Currency != tc.currency || !slices.Contains([]string{"fixed", "estimate"}, e.Billing) {
					t.Errorf("%s: fee %+v billing %s", e.ID, e.Fee, e.Billing)
				}
				if title, tasks, ok := strings.Cut(e.Scope, ": "); !ok || title == "" || tasks == "" {
					t.Errorf("%s: scope %q is not a quote's title and tasks", e.ID, e.Scope)
				}
				if e.ReleasedJobs == nil || len(e.ReleasedJobs) != 0 {
					t.Errorf("%s: released jobs %v", e.ID, e.ReleasedJobs)
				}
			}
			if lettered < len(engs)/2 || signedLettered < len(engs)/4 {
				t.Errorf("%d of %d engagements link their letter, %d their signed letter", lettered, len(engs), signedLettered)
			}
			for _, d := range docs {
				if d.Engagement != "" {
					t.Errorf("%s: names engagement %s, which no document store does", d.ID, d.Engagement)
				}
			}
			if engStatuses["signed"] < len(engs)/2 || len(engStatuses) != len(practice.EngagementStatuses) {
				t.Errorf("engagement statuses %v", engStatuses)
			}

			invStatuses := map[string]int{}
			prev := ""
			for _, inv := range invoices {
				checkTimes(inv.ID, inv.CreatedAt, inv.UpdatedAt)
				invStatuses[inv.Status]++
				if len(inv.Number) != len("INV-004213") || !strings.HasPrefix(inv.Number, "INV-") || inv.Number <= prev {
					t.Errorf("%s: number %s after %s", inv.ID, inv.Number, prev)
				}
				prev = inv.Number
				paid := inv.Status == "paid"
				zero := inv.AmountDue.Amount == "0.00"
				if paid != (inv.PaidAt != nil) || paid != (inv.SettledVia != "") || (paid || inv.Status == "void") != zero ||
					inv.Total.Currency != tc.currency || inv.AmountDue.Currency != tc.currency {
					t.Errorf("%s: %+v", inv.ID, inv)
				}
				if due := minor(t, inv.AmountDue); inv.Status == "partially_paid" && (due <= 0 || due >= minor(t, inv.Total)) {
					t.Errorf("%s: partially paid but %s of %s due", inv.ID, inv.AmountDue.Amount, inv.Total.Amount)
				}
				if (inv.IssuedOn == "") != (inv.Status == "draft" || inv.Status == "awaiting_approval") {
					t.Errorf("%s: status %s issued_on %q", inv.ID, inv.Status, inv.IssuedOn)
				}
			}
			if invStatuses["paid"] < len(invoices)/2 || len(invStatuses) != len(practice.InvoiceStatuses) {
				t.Errorf("invoice statuses %v", invStatuses)
			}
		})
	}
}

func TestLiveAndSandboxShareNothing(t *testing.T) {
	r, _ := openAcme(t)
	for _, k := range practice.Kinds {
		live := map[string]bool{}
		for _, raw := range all(t, r, acme, k, practice.Filter{}, 200) {
			live[idOf(t, raw)] = true
		}
		for _, raw := range all(t, r, acmeSandbox, k, practice.Filter{}, 200) {
			if live[idOf(t, raw)] {
				t.Fatalf("%s %s is in live and sandbox", k, idOf(t, raw))
			}
		}
	}
}

// minor reads a Money amount in pence or cents.
func minor(tb testing.TB, m practice.Money) int64 {
	tb.Helper()
	n, err := strconv.ParseInt(strings.Replace(m.Amount, ".", "", 1), 10, 64)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func idOf(tb testing.TB, raw json.RawMessage) string {
	tb.Helper()
	var v struct{ ID string }
	if err := json.Unmarshal(raw, &v); err != nil {
		tb.Fatal(err)
	}
	return v.ID
}

func TestOpenRejectsBadFirms(t *testing.T) {
	db := openDB(t, t.TempDir())
	for _, firms := range [][]string{{""}, {"frm_acme", "frm_acme"}} {
		if _, err := Open(db, firms); err == nil {
			t.Errorf("Open(%q) succeeded", firms)
		}
	}
}

func TestIDs(t *testing.T) {
	var e [10]byte
	for i := range e {
		e[i] = 0xff
	}
	if got := formatID("job_", 1<<48-1, e); got != "job_7zzzzzzzzzzzzzzzzzzzzzzzzz" {
		t.Errorf("largest id = %s", got)
	}
	if got := formatID("job_", 0, [10]byte{}); got != "job_"+strings.Repeat("0", 26) {
		t.Errorf("smallest id = %s", got)
	}

	// Ids made in the same millisecond, or after the clock stepped back,
	// still sort in the order they were made.
	var src idSource
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	prev := ""
	for i := range 1000 {
		now := at
		if i%3 == 2 {
			now = at.Add(-time.Hour)
		}
		id := src.next("cli_", now)
		if !validID("cli_", id) || id <= prev {
			t.Fatalf("id %d: %s after %s", i, id, prev)
		}
		prev = id
	}
	if got := idTime(t, prev); !got.Equal(at) {
		t.Errorf("id time %v, want %v", got, at)
	}
}

func ExampleRecords_List() {
	dir, _ := os.MkdirTemp("", "demo")
	defer os.RemoveAll(dir)
	db, _ := bbolt.Open(filepath.Join(dir, "practicegw.db"), 0o600, nil)
	defer db.Close()
	r, _ := Open(db, []string{"frm_acme"})

	page, _ := r.List(context.Background(), practice.Tenant{Firm: "frm_acme"}, practice.Jobs,
		practice.Query{Filter: practice.Filter{Stage: "in_review"}, Limit: 2})
	fmt.Println(len(page.Items), page.HasMore)
	// Output: 2 true
}

// onlyLetter is the id of the one document of kind of e's client filed
// within 30 days of e's created_at, or "" when there is none or more,
// or when that document is as near another engagement of the client.
func onlyLetter(docs []practice.Document, engs []practice.Engagement, e practice.Engagement, kind string) string {
	near := func(a, b time.Time) bool { gap := a.Sub(b); return gap <= 30*24*time.Hour && gap >= -30*24*time.Hour }
	var found *practice.Document
	for i, d := range docs {
		if practice.IDOf(d.Client) != practice.IDOf(e.Client) || d.Kind != kind || !near(d.CreatedAt, e.CreatedAt) {
			continue
		}
		if found != nil {
			return ""
		}
		found = &docs[i]
	}
	if found == nil {
		return ""
	}
	// A letter near another engagement of the client is either's.
	for _, o := range engs {
		if o.ID != e.ID && practice.IDOf(o.Client) == practice.IDOf(e.Client) && near(found.CreatedAt, o.CreatedAt) {
			return ""
		}
	}
	return found.ID
}
