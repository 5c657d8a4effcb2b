package readmodel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	boltstore "github.com/practicegw/practicegw/store/bolt"
)

const firm = "frm_acme"

// secretsKey seals the stores' secrets; instances sharing a file share it.
var secretsKey, _ = sealed.Random()

var (
	live  = practice.Tenant{Firm: firm}
	epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
)

// sink collects change records.
type sink struct {
	mu      sync.Mutex
	changes []practice.Change
}

func (s *sink) Publish(_ context.Context, c practice.Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, c)
	return nil
}

func (s *sink) of(id string) []practice.Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []practice.Change
	for _, c := range s.changes {
		if c.ResourceID == id {
			out = append(out, c)
		}
	}
	return out
}

func (s *sink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.changes)
}

// karbonDouble holds 3 users, 40 contacts and 250 work items: every
// collection crosses Karbon's 100-item pages.
func karbonDouble(t *testing.T) *vendortest.Karbon {
	k := vendortest.StartKarbon(t)
	k.AddUser(vendortest.KarbonUser{Id: "U1partner", Name: "Pat Partner", EmailAddress: "pat@firm.example", Roles: []string{"Partner"}})
	k.AddUser(vendortest.KarbonUser{Id: "U2manager", Name: "Mo Manager", EmailAddress: "mo@firm.example", Roles: []string{"Client Manager"}})
	k.AddUser(vendortest.KarbonUser{Id: "U3staff", Name: "Sam Staff", EmailAddress: "sam@firm.example"})
	owners := []string{"U1partner", "U2manager"}
	for i := range 40 {
		k.AddContact(vendortest.KarbonContact{ContactKey: fmt.Sprintf("C%03d", i), FirstName: "Ann", LastName: fmt.Sprintf("Client%03d", i),
			ContactType: "Client", Email: fmt.Sprintf("ann%d@example.com", i), Country: "GB",
			OwnerKey: owners[i%2], LastModified: epoch.Add(time.Duration(i) * time.Hour)})
	}
	for i := range 250 {
		deadline := epoch.AddDate(0, 0, i).Format(time.RFC3339)
		k.AddWorkItem(vendortest.KarbonWorkItem{WorkItemKey: fmt.Sprintf("W%04d", i), Title: fmt.Sprintf("Accounts %d", i),
			AssigneeKey: owners[i%2], ClientKey: fmt.Sprintf("C%03d", i%40), ClientType: "Contact",
			StartDate: epoch.Format(time.RFC3339), DeadlineDate: &deadline, WorkType: "Accounts", PrimaryStatus: "Planned"})
	}
	return k
}

// env is a firm on Karbon with its read model in a bbolt file.
type env struct {
	t       *testing.T
	k       *vendortest.Karbon
	db      *bbolt.DB
	store   *boltstore.ReadModel
	sink    *sink
	adapter *karbon.Adapter
	model   *readmodel.Model
	rec     *changes.Recorder
}

func newEnv(t *testing.T, k *vendortest.Karbon, db *bbolt.DB) *env {
	t.Helper()
	st, err := boltstore.New(db, nil, boltstore.WithSecrets(secretsKey))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, k: k, db: db, store: st.ReadModel(), sink: &sink{}}
	e.model = readmodel.New(readmodel.Config{Firm: firm, Store: e.store})
	e.rec = &changes.Recorder{State: e.model}
	e.adapter, err = karbon.New(karbon.Config{Firm: firm, AccessKey: k.AccessKey, Bearer: k.Bearer, BaseURL: k.URL,
		WebhookSigningKey: "karbon-signing-key-0001", NoteAuthor: "pat@firm.example",
		Upstream: upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second), MaxAttempts: 1}},
		upstream.Deps{State: e.model, Recorder: e.rec, Changes: e.sink})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func openDB(t *testing.T, dir string) *bbolt.DB {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(dir, "practicegw.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// syncer builds the sync of the records kinds over reader (the adapter
// unless a test wraps it) and loads the model.
func (e *env) syncer(holder string, reader practice.Reader) *readmodel.Syncer {
	e.t.Helper()
	kinds := []practice.Kind{practice.Clients, practice.Jobs, practice.People}
	for _, k := range kinds {
		e.model.Serve(k, e.adapter)
	}
	if err := e.model.Load(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return readmodel.NewSyncer(readmodel.SyncedSystem{Role: "records", Label: "karbon", Kinds: kinds, Reader: reader},
		readmodel.SyncDeps{Model: e.model, Recorder: e.rec, Sink: e.sink, Checkpoints: e.store, Leases: e.store, Holder: holder},
		readmodel.SyncConfig{Poll: 50 * time.Millisecond, LeaseTTL: time.Second})
}

// run runs s until the test ends.
func run(t *testing.T, s *readmodel.Syncer) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return cancel
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.True(t, 10*time.Second, 10*time.Millisecond, what, cond)
}

func listAll(t *testing.T, r practice.Reader, k practice.Kind, f practice.Filter) []string {
	t.Helper()
	var ids []string
	q := practice.Query{Filter: f, Limit: 37}
	for range 100 {
		p, err := r.List(context.Background(), live, k, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range p.Items {
			var v struct{ ID string }
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, v.ID)
		}
		if !p.HasMore {
			return ids
		}
		q.Cursor = p.Next
	}
	t.Fatal("paging did not end")
	return nil
}

func live_(s *readmodel.Syncer) func() bool {
	return func() bool { return s.Status().State == readmodel.StateLive }
}

func TestBackfillServesEveryRecordWithTheSameFilters(t *testing.T) {
	e := newEnv(t, karbonDouble(t), openDB(t, t.TempDir()))
	s := e.syncer("one", e.adapter)
	run(t, s)
	waitFor(t, "the backfill", live_(s))

	if got := len(listAll(t, e.model, practice.Jobs, practice.Filter{})); got != 250 {
		t.Errorf("%d jobs in the model, want 250", got)
	}
	for _, f := range []practice.Filter{{Owner: "usr_U1partner"}, {Client: "cli_c-C007"}, {DeadlineAfter: "2026-05-01", DeadlineBefore: "2026-06-01"}} {
		want := listAll(t, e.adapter, practice.Jobs, f)
		got := listAll(t, e.model, practice.Jobs, f)
		if fmt.Sprint(got) != fmt.Sprint(want) || len(got) == 0 {
			t.Errorf("filter %+v: the model lists %d jobs, Karbon %d", f, len(got), len(want))
		}
	}
	if n := e.sink.count(); n != 0 {
		t.Errorf("the backfill raised %d change records; records that were already there raise none", n)
	}
	fr, _ := e.model.Freshness(practice.Jobs)
	if !fr.Backfilled || fr.ConfirmedAt.IsZero() || fr.State != readmodel.StateLive {
		t.Errorf("freshness after the backfill: %+v", fr)
	}
	st := s.Status()
	if st.Holder != "one" || len(st.Kinds) != 3 || st.Kinds[1].Records != 250 || st.Kinds[1].About != 250 {
		t.Errorf("status after the backfill: %+v", st)
	}

	// Reads spend nothing of Karbon's budget.
	before := e.k.Faults.Hits()
	listAll(t, e.model, practice.Jobs, practice.Filter{Stage: "planned"})
	if _, err := e.model.Get(context.Background(), live, practice.Jobs, "job_W0001"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.model.Get(context.Background(), live, practice.Jobs, "job_Wnope"); err == nil {
		t.Error("a job Karbon does not have was found")
	}
	// The sync may poll meanwhile; what reads would cost is a list per
	// page of 37 and a Get each, far more than a poll's one page.
	if n := e.k.Faults.Hits() - before; n > 3 {
		t.Errorf("reads from the model reached Karbon %d times", n)
	}
}

func TestPollAndWebhookRaiseOneChange(t *testing.T) {
	e := newEnv(t, karbonDouble(t), openDB(t, t.TempDir()))
	s := e.syncer("one", e.adapter)
	run(t, s)
	waitFor(t, "the backfill", live_(s))

	// Renamed inside Karbon with no webhook: the poll notices.
	e.k.AddContact(vendortest.KarbonContact{ContactKey: "C005", FirstName: "Ann", LastName: "Renamed",
		ContactType: "Client", Email: "ann5@example.com", Country: "GB", OwnerKey: "U2manager", LastModified: time.Now().UTC()})
	// The change record is published, then the copy takes the change.
	waitFor(t, "the poll to see the change", func() bool {
		raw, err := e.model.Get(context.Background(), live, practice.Clients, "cli_c-C005")
		var c practice.Client
		return err == nil && json.Unmarshal(raw, &c) == nil && c.Name == "Ann Renamed" && len(e.sink.of("cli_c-C005")) > 0
	})
	// Then Karbon's webhook for the same change arrives: compared with
	// the same copy, it finds nothing new.
	body := vendortest.KarbonWebhook("Contact", "C005", "Updated", time.Now())
	r := httptest.NewRequest(http.MethodPost, "/ingest/karbon", bytes.NewReader(body))
	r.Header.Set("Signature", vendortest.SignKarbon("karbon-signing-key-0001", body))
	w := httptest.NewRecorder()
	e.adapter.Webhook(e.sink).ServeHTTP(w, r)
	if w.Code/100 != 2 {
		t.Fatalf("webhook answered %d", w.Code)
	}
	waitFor(t, "two more polls", pollsAfter(s))
	if n := len(e.sink.of("cli_c-C005")); n != 1 {
		t.Errorf("%d change records for one change, want 1", n)
	}

	// A work item moved and announced by Karbon's webhook: work items
	// are not polled (Karbon keeps no modification time on them).
	e.k.MoveWorkItem("W0003", "InProgress", "")
	body = vendortest.KarbonWebhook("Work", "W0003", "Updated", time.Now())
	r = httptest.NewRequest(http.MethodPost, "/ingest/karbon", bytes.NewReader(body))
	r.Header.Set("Signature", vendortest.SignKarbon("karbon-signing-key-0001", body))
	w = httptest.NewRecorder()
	e.adapter.Webhook(e.sink).ServeHTTP(w, r)
	if w.Code/100 != 2 {
		t.Fatalf("webhook answered %d", w.Code)
	}
	raw, err := e.model.Get(context.Background(), live, practice.Jobs, "job_W0003")
	if err != nil {
		t.Fatal(err)
	}
	var j practice.Job
	if err := json.Unmarshal(raw, &j); err != nil || j.Stage != "in_progress" {
		t.Fatalf("the model after the webhook: %s", raw)
	}
	if n := len(e.sink.of("job_W0003")); n != 1 {
		t.Errorf("%d change records for the move, want 1", n)
	}
}

// pollsAfter reports true once the clients' confirmation has moved twice
// past now.
func pollsAfter(s *readmodel.Syncer) func() bool {
	first := s.Status().Kinds[0].ConfirmedAt
	var seen atomic.Int32
	last := first
	return func() bool {
		c := s.Status().Kinds[0].ConfirmedAt
		if c.After(last) {
			last = c
			seen.Add(1)
		}
		return seen.Load() >= 2
	}
}

func TestReconciliationRemovesWhatTheVendorNoLongerHas(t *testing.T) {
	e := newEnv(t, karbonDouble(t), openDB(t, t.TempDir()))
	s := e.syncer("one", e.adapter)
	run(t, s)
	waitFor(t, "the backfill", live_(s))

	// A job the model holds and Karbon no longer has.
	gone := json.RawMessage(`{"id":"job_Wgone","object":"job","title":"Gone","client":"cli_c-C001","owner":"usr_U1partner","stage":"planned","closed_at":null,"created_at":"2026-03-02T09:00:00Z","updated_at":"2026-03-02T09:00:00Z","version":1}`)
	if err := e.model.Apply(context.Background(), []readmodel.Update{{Kind: practice.Jobs, ID: "job_Wgone", Raw: gone}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Resync(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The removal is published, then the copy forgets the job.
	waitFor(t, "the reconciliation", func() bool {
		_, err := e.model.Get(context.Background(), live, practice.Jobs, "job_Wgone")
		return len(e.sink.of("job_Wgone")) > 0 && err != nil
	})
	c := e.sink.of("job_Wgone")
	if len(c) != 1 || string(c[0].After) != "null" || string(c[0].Before) != string(gone) {
		t.Fatalf("removal change records: %+v", c)
	}
	if n := e.sink.count(); n != 1 {
		t.Errorf("%d change records, want only the removal's", n)
	}
}

func TestOneSyncPerFirmSystem(t *testing.T) {
	k := karbonDouble(t)
	db := openDB(t, t.TempDir())
	a, b := newEnv(t, k, db), newEnv(t, k, db)
	ra, rb := &cursorReader{Reader: a.adapter}, &cursorReader{Reader: b.adapter}
	sa, sb := a.syncer("a", ra), b.syncer("b", rb)
	run(t, sa)
	run(t, sb)
	waitFor(t, "both instances to see the sync live", func() bool { return live_(sa)() && live_(sb)() })
	if ha, hb := sa.Status().Holder, sb.Status().Holder; ha != hb || ha == "" {
		t.Errorf("holders: %q and %q", ha, hb)
	}
	starts := 0
	for _, r := range []*cursorReader{ra, rb} {
		r.mu.Lock()
		for _, c := range r.cursors {
			if c == "" {
				starts++
			}
		}
		r.mu.Unlock()
	}
	if starts != 1 {
		t.Errorf("the jobs backfill started %d times across two instances, want once", starts)
	}
}

// stallingReader serves the first jobs page and then stalls until its
// context ends: a gateway stopped mid-backfill.
type stallingReader struct {
	practice.Reader
	jobs    atomic.Int32
	stalled chan struct{}
}

func (r *stallingReader) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	if k == practice.Jobs && r.jobs.Add(1) > 1 {
		close(r.stalled)
		<-ctx.Done()
		return practice.Page{}, ctx.Err()
	}
	p, err := r.Reader.List(ctx, t, k, q)
	if k == practice.Jobs {
		p.Total = 250
	}
	return p, err
}

// cursorReader records the cursors the jobs pages are asked with.
type cursorReader struct {
	practice.Reader
	mu      sync.Mutex
	cursors []string
}

func (r *cursorReader) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	if k == practice.Jobs && q.Filter == (practice.Filter{}) {
		r.mu.Lock()
		r.cursors = append(r.cursors, q.Cursor)
		r.mu.Unlock()
	}
	return r.Reader.List(ctx, t, k, q)
}

func TestBackfillResumesFromItsCheckpoint(t *testing.T) {
	k := karbonDouble(t)
	dir := t.TempDir()
	db := openDB(t, dir)
	first := newEnv(t, k, db)
	stall := &stallingReader{Reader: first.adapter, stalled: make(chan struct{})}
	s1 := first.syncer("first", stall)
	stop := run(t, s1)
	<-stall.stalled
	// A vendor that says how many records a listing holds (Xero) gives
	// the backfill's progress its "about".
	if p := s1.Status().Progress(); !strings.Contains(p, "karbon jobs: 200 of about 250") {
		t.Errorf("progress during the backfill: %q", p)
	}
	stop()
	if got := first.model.Count(practice.Jobs); got != 200 {
		t.Fatalf("%d jobs kept before the stop, want the first page's 200", got)
	}

	second := newEnv(t, k, db)
	cr := &cursorReader{Reader: second.adapter}
	s2 := second.syncer("second", cr)
	run(t, s2)
	waitFor(t, "the backfill", live_(s2))
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if len(cr.cursors) == 0 || cr.cursors[0] == "" {
		t.Errorf("the restarted backfill read jobs from the start (cursors %q)", cr.cursors)
	}
	if got := second.model.Count(practice.Jobs); got != 250 {
		t.Errorf("%d jobs after the resumed backfill, want 250", got)
	}
}

// A sync made again over a finished backfill's checkpoint is live from
// its first Status once loaded, before it runs: a reopened connection
// never shows a backfill it will not do.
func TestLoadedSyncSaysWhereItStandsBeforeItRuns(t *testing.T) {
	k := karbonDouble(t)
	db := openDB(t, t.TempDir())
	first := newEnv(t, k, db)
	s1 := first.syncer("first", first.adapter)
	stop := run(t, s1)
	waitFor(t, "the backfill", live_(s1))
	// Reads are told the backfill is over before its checkpoint is saved:
	// a sync loaded meanwhile would rightly resume it. Wait for the save.
	probe := newEnv(t, k, db).syncer("probe", first.adapter)
	waitFor(t, "the backfill's checkpoint", func() bool {
		probe.Load(context.Background())
		return probe.Status().State == readmodel.StateLive
	})
	stop()

	second := newEnv(t, k, db)
	s2 := second.syncer("second", second.adapter)
	if st := s2.Status(); st.State != readmodel.StateBackfilling {
		t.Fatalf("a sync that has read nothing says %q", st.State)
	}
	s2.Load(context.Background())
	if st := s2.Status(); st.State != readmodel.StateLive {
		t.Errorf("a loaded sync over a finished backfill says %q (%s), want live", st.State, st.Progress())
	}
}

func TestVendorOutageKeepsServingMarkedFailing(t *testing.T) {
	e := newEnv(t, karbonDouble(t), openDB(t, t.TempDir()))
	s := e.syncer("one", e.adapter)
	run(t, s)
	waitFor(t, "the backfill", live_(s))
	confirmed := s.Status().ConfirmedAt

	e.k.Faults.Down(vendortest.Fault{Status: 503})
	waitFor(t, "reads to be marked failing", func() bool {
		fr, _ := e.model.Freshness(practice.Jobs)
		return fr.State == readmodel.StateFailing
	})
	if got := len(listAll(t, e.model, practice.Jobs, practice.Filter{})); got != 250 {
		t.Errorf("%d jobs served during the outage, want 250", got)
	}
	fr, _ := e.model.Freshness(practice.Jobs)
	if fr.State != readmodel.StateFailing || fr.ConfirmedAt.Before(confirmed) || fr.ConfirmedAt.IsZero() {
		t.Errorf("freshness during the outage: %+v (confirmed before it %s)", fr, confirmed)
	}
	if why := s.Status().Why; why == "" {
		t.Error("a failing sync says nothing of why")
	}

	e.k.Faults.Up()
	waitFor(t, "the sync to recover", live_(s))
}

// A notification that its delivery could not read in its time is read by
// the instance holding the sync, woken through Wakes, beside whatever the
// sync is doing; the status says the kind is notified and how long the
// notification took to become a change record.
func TestNotifiedReadsAreTheHoldersWhenADeliveryLeavesThem(t *testing.T) {
	k := karbonDouble(t)
	e := newEnv(t, k, openDB(t, t.TempDir()))
	inbox := notifications.NewMemory(nil)
	wakes := readmodel.NewWakes(nil)
	var latency readmodel.Latency
	holder, err := karbon.New(karbon.Config{Firm: firm, AccessKey: k.AccessKey, Bearer: k.Bearer, BaseURL: k.URL,
		WebhookSigningKey: "karbon-signing-key-0001", Upstream: upstream.Policy{RateLimit: -1}},
		upstream.Deps{State: e.model, Recorder: e.rec, Changes: e.sink, Notifications: inbox,
			Heard: func(at time.Time) { latency.Add(time.Since(at), time.Now()) }})
	if err != nil {
		t.Fatal(err)
	}
	s := e.syncer("one", holder)
	readmodel.WithLatency(&latency)(s)
	defer wakes.Add(s)()
	run(t, s)
	waitFor(t, "the backfill", live_(s))

	// The instance the notification reaches has no time to read it.
	receiver, err := karbon.New(karbon.Config{Firm: firm, AccessKey: k.AccessKey, Bearer: k.Bearer, BaseURL: k.URL,
		WebhookSigningKey: "karbon-signing-key-0001", WebhookTimeout: upstream.Duration(time.Nanosecond),
		Upstream: upstream.Policy{RateLimit: -1}},
		upstream.Deps{State: e.model, Recorder: e.rec, Changes: e.sink, Notifications: inbox,
			Wake: func(ctx context.Context) error { return wakes.Ring(ctx, firm, "records") }})
	if err != nil {
		t.Fatal(err)
	}
	k.MoveWorkItem("W0002", "Completed", "")
	body := vendortest.KarbonWebhook("Work", "W0002", "Updated", time.Now())
	r := httptest.NewRequest(http.MethodPost, "/ingest", strings.NewReader(string(body)))
	r.Header.Set("Signature", vendortest.SignKarbon("karbon-signing-key-0001", body))
	w := httptest.NewRecorder()
	receiver.Webhook(e.sink).ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("the delivery was answered %d: it must be acknowledged at once", w.Code)
	}
	waitFor(t, "the holder's read", func() bool { return len(e.sink.of("job_W0002")) == 1 })
	// Told once the change is recorded, just after it is published.
	waitFor(t, "the latency told", func() bool { return s.Status().Latency.Count == 1 })
	st := s.Status()
	if st.Latency.Count != 1 || st.Latency.P99 <= 0 || st.Latency.P99 > 10*time.Second {
		t.Errorf("latency %+v", st.Latency)
	}
	for _, ks := range st.Kinds {
		if !ks.Notified {
			t.Errorf("%s: not said to be notified", ks.Kind)
		}
	}
	if got := st.Reaches(practice.Jobs); !strings.HasPrefix(got, "notified") {
		t.Errorf("jobs reach the gateway %q", got)
	}
}
