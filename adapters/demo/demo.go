// Package demo serves deterministic demo practice records for any number of
// firms, so that the gateway pages, filters, writes and raises events with
// no practice-management system behind it.
//
// Each firm has live and sandbox records, seeded from the firm id alone: the
// same id gives byte-identical records on every machine. Records are kept in
// bbolt under the top-level bucket "demo" (demo/<firm>/<live|sandbox>/<kind>,
// keyed by id) and held in memory already encoded, so a read neither
// decodes nor encodes JSON. A write stores the record and hands its
// practice.Change to the change log in the same transaction: by default the
// top-level bucket "outbox", which the event pipeline drains; in the
// embedded mode the pipeline's own first stage (SetChangeLog), which
// records the change's events and queues their deliveries in it.
//
// A firm's live or sandbox records are seeded and loaded when first used,
// and Unload drops those unused for a while: a gateway serving hundreds of
// firms from their real systems holds only the demo records someone reads
// (a sandbox credential, a role the firm leaves to the demo), rather than
// some 4 MB for each of every firm's two sets.
package demo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/internal/groupcommit"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/recordindex"
)

// entry is one record in memory: its wire bytes and the fields the filters
// compare, so that listing never touches JSON.
type entry = recordindex.Entry

const (
	demoBucket   = "demo"
	outboxBucket = "outbox"
)

// Records is the demo adapter. It is safe for concurrent use.
type Records struct {
	db     *bbolt.DB
	c      *groupcommit.Committer
	now    func() time.Time
	ids    idSource
	signal chan struct{}
	// log is where writes' changes go (a *logHolder); nil is the outbox.
	log atomic.Pointer[logHolder]
	// tenants is replaced whole when firms are added, so that readers
	// never lock for it.
	tenants atomic.Pointer[map[practice.Tenant]*tenant]
	adding  sync.Mutex // serialises AddFirms
}

// Option configures Open.
type Option func(*Records)

// withClock sets the clock used for timestamps and ids of writes; the
// default is time.Now. The seed never reads the clock.
func withClock(now func() time.Time) Option {
	return func(r *Records) { r.now = now }
}

// WithCommitter makes the records' writes share c's commits: the
// committer of every writer of db (default: one of the records' own).
func WithCommitter(c *groupcommit.Committer) Option {
	return func(r *Records) { r.c = c }
}

// Open serves the firms' records from db, seeding each firm's live or
// sandbox records there when they are first used. db stays the caller's
// to close.
func Open(db *bbolt.DB, firms []string, opts ...Option) (*Records, error) {
	r := &Records{
		db:     db,
		now:    time.Now,
		signal: make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(r)
	}
	if r.c == nil {
		r.c = groupcommit.New(db)
	}
	seen := map[string]bool{}
	for _, firm := range firms {
		if seen[firm] {
			return nil, fmt.Errorf("demo: firm %q listed twice", firm)
		}
		seen[firm] = true
	}
	r.tenants.Store(&map[practice.Tenant]*tenant{})
	err := db.Update(func(tx *bbolt.Tx) error {
		for _, b := range []string{demoBucket, outboxBucket} {
			if _, err := tx.CreateBucketIfNotExists([]byte(b)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if err := r.AddFirms(firms); err != nil {
		return nil, err
	}
	return r, nil
}

// AddFirms makes Records serve firms it does not serve yet, so that a
// configuration reload that adds a firm keeps one set of records rather
// than two. Their records are seeded and loaded when first used.
func (r *Records) AddFirms(firms []string) error {
	r.adding.Lock()
	defer r.adding.Unlock()
	cur := *r.tenants.Load()
	var added []*tenant
	for _, firm := range firms {
		if firm == "" {
			return errors.New("demo: empty firm id")
		}
		if _, ok := cur[practice.Tenant{Firm: firm}]; ok {
			continue
		}
		st := styleFor(firm)
		for _, sandbox := range []bool{false, true} {
			added = append(added, &tenant{Tenant: practice.Tenant{Firm: firm, Sandbox: sandbox}, style: st})
		}
	}
	if len(added) == 0 {
		return nil
	}
	next := make(map[practice.Tenant]*tenant, len(cur)+len(added))
	for k, v := range cur {
		next[k] = v
	}
	for _, ts := range added {
		next[ts.Tenant] = ts
	}
	r.tenants.Store(&next)
	return nil
}

func (r *Records) clock() time.Time {
	return r.now().UTC().Truncate(time.Millisecond)
}

// seed writes a tenant's seed unless it has records already, in one
// transaction so that a tenant is either fully seeded or not at all. Its
// caller holds the tenant's write lock, so it commits on its own rather
// than through the group committer, whose leader takes that lock to apply
// the tenant's committed writes.
func (r *Records) seed(ts *tenant) error {
	seeded := false
	err := r.db.View(func(tx *bbolt.Tx) error {
		seeded = tenantBucket(tx, ts.Tenant) != nil
		return nil
	})
	if err != nil || seeded {
		return err
	}
	return r.db.Update(func(tx *bbolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists([]byte(demoBucket))
		if err != nil {
			return err
		}
		fb, err := root.CreateBucketIfNotExists([]byte(ts.Firm))
		if err != nil {
			return err
		}
		if fb.Bucket([]byte(mode(ts.Sandbox))) != nil {
			return nil
		}
		tb, err := fb.CreateBucket([]byte(mode(ts.Sandbox)))
		if err != nil {
			return err
		}
		set, err := generate(ts.Tenant, ts.style)
		if err != nil {
			return err
		}
		for i, k := range practice.Kinds {
			kb, err := tb.CreateBucket([]byte(k))
			if err != nil {
				return err
			}
			// Seed keys arrive in order, so full pages waste no space.
			kb.FillPercent = 0.9
			for _, rec := range set[i] {
				if err := kb.Put([]byte(rec.id), rec.raw); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// loadLocked seeds and loads ts's records unless memory holds them; the
// caller holds ts.wmu.
func (r *Records) loadLocked(ts *tenant) error {
	if ts.isLoaded() {
		return nil
	}
	if err := r.seed(ts); err != nil {
		return fmt.Errorf("demo: seed %s: %w", ts, err)
	}
	var held loaded
	err := r.db.View(func(tx *bbolt.Tx) error {
		tb := tenantBucket(tx, ts.Tenant)
		if tb == nil {
			return errors.New("no records")
		}
		var err error
		held, err = load(tb)
		return err
	})
	if err != nil {
		return fmt.Errorf("demo: load %s: %w", ts, err)
	}
	ts.mu.Lock()
	ts.loaded = held
	ts.mu.Unlock()
	return nil
}

// read runs fn over t's records in memory, under their read lock, loading
// them first when they are not.
func (r *Records) read(t practice.Tenant, fn func(*tenant)) error {
	ts, err := r.lookup(t)
	if err != nil {
		return err
	}
	for {
		ts.mu.RLock()
		if ts.loaded.ok {
			ts.touch(r.clock())
			fn(ts)
			ts.mu.RUnlock()
			return nil
		}
		ts.mu.RUnlock()
		ts.wmu.Lock()
		err := r.loadLocked(ts)
		ts.wmu.Unlock()
		if err != nil {
			return err
		}
	}
}

// Unload drops from memory the records of every firm's live or sandbox
// set not read or written since before: the next use loads them again,
// writes included, from db. It returns how many sets it dropped.
func (r *Records) Unload(before time.Time) int {
	n := 0
	for _, ts := range *r.tenants.Load() {
		if !ts.isLoaded() || !ts.usedBefore(before) {
			continue
		}
		ts.wmu.Lock()
		ts.mu.Lock()
		// Records in flight are applied to the index when they commit.
		if ts.loaded.ok && ts.usedBefore(before) && len(ts.loaded.flight) == 0 {
			ts.loaded = loaded{}
			n++
		}
		ts.mu.Unlock()
		ts.wmu.Unlock()
	}
	return n
}

// Loaded is how many firms' live or sandbox sets memory holds.
func (r *Records) Loaded() int {
	n := 0
	for _, ts := range *r.tenants.Load() {
		if ts.isLoaded() {
			n++
		}
	}
	return n
}

func mode(sandbox bool) string {
	if sandbox {
		return "sandbox"
	}
	return "live"
}

func tenantBucket(tx *bbolt.Tx, t practice.Tenant) *bbolt.Bucket {
	root := tx.Bucket([]byte(demoBucket))
	if root == nil {
		return nil
	}
	fb := root.Bucket([]byte(t.Firm))
	if fb == nil {
		return nil
	}
	return fb.Bucket([]byte(mode(t.Sandbox)))
}

// tenant holds one firm's live or sandbox records in memory, once they
// are first used.
type tenant struct {
	practice.Tenant
	style *style

	// wmu serialises writes, from reading the current record to updating
	// the index, so a write never works from a stale record, and loading
	// and unloading. Readers only wait on mu, and only while the index
	// itself changes.
	wmu sync.Mutex
	// mu guards loaded, which changes only with both wmu and mu held, so
	// holding either is enough to read it.
	mu sync.RWMutex
	loaded
	// used is when the records were last read or written (Unix
	// nanoseconds).
	used atomic.Int64
}

// loaded is what memory holds of a tenant: nothing until ok.
type loaded struct {
	ok   bool
	cols [numKinds]recordindex.Collection
	// letters are the engagement letters among the documents, which
	// engagements are linked to as they are read, by the rule the read
	// model links a firm's real ones by; they change with cols.
	letters *practice.Letters
	// defaultOwner owns clients created without one: the first partner.
	defaultOwner string
	// owners are the people who own clients that triggers create.
	owners []string
	// lastInvoice is the highest invoice number; guarded by wmu.
	lastInvoice int
	// flight holds the records of writes submitted but not yet committed,
	// each the latest such state of its record; guarded by wmu.
	flight map[flightKey]flying
}

type flightKey struct {
	kind practice.Kind
	id   string
}

// flying is a record's state a write in flight stores.
type flying struct {
	entry entry
	w     *write
}

// fly puts w's records in flight; the caller holds wmu.
func (ts *tenant) fly(w *write) {
	if ts.flight == nil {
		ts.flight = make(map[flightKey]flying)
	}
	for _, p := range w.pending {
		ts.flight[flightKey{p.kind, p.entry.ID}] = flying{entry: p.entry, w: w}
	}
}

// land takes w's records out of flight, committed or not, but for those a
// later write in flight has changed since; the caller holds wmu.
func (ts *tenant) land(w *write) {
	for _, p := range w.pending {
		k := flightKey{p.kind, p.entry.ID}
		if f, ok := ts.flight[k]; ok && f.w == w {
			delete(ts.flight, k)
		}
	}
}

func (ts *tenant) isLoaded() bool {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.loaded.ok
}

func (ts *tenant) touch(now time.Time) {
	if n := now.UnixNano(); n > ts.used.Load() {
		ts.used.Store(n)
	}
}

func (ts *tenant) usedBefore(t time.Time) bool { return ts.used.Load() < t.UnixNano() }

const numKinds = 6

// kindIndex maps a kind to its slot in tenant.cols, following practice.Kinds.
func kindIndex(k practice.Kind) (int, bool) {
	switch k {
	case practice.Clients:
		return 0, true
	case practice.Engagements:
		return 1, true
	case practice.Jobs:
		return 2, true
	case practice.Documents:
		return 3, true
	case practice.Invoices:
		return 4, true
	case practice.People:
		return 5, true
	}
	return 0, false
}

// load reads a tenant's records from its bucket.
func load(tb *bbolt.Bucket) (loaded, error) {
	l := loaded{ok: true}
	for i, k := range practice.Kinds {
		kb := tb.Bucket([]byte(k))
		if kb == nil {
			return loaded{}, fmt.Errorf("no %s bucket", k)
		}
		var col recordindex.Collection
		err := kb.ForEach(func(_, v []byte) error {
			e, err := recordindex.NewEntry(bytes.Clone(v))
			if err != nil {
				return err
			}
			col = append(col, e)
			return nil
		})
		if err != nil {
			return loaded{}, fmt.Errorf("%s: %w", k, err)
		}
		l.cols[i] = col
	}
	l.letters = practice.NewLetters()
	for _, e := range l.col(practice.Documents) {
		l.letters.Put(nil, e.ID, e.Raw)
	}
	for _, e := range l.col(practice.Engagements) {
		l.letters.PutEngagement(nil, e.ID, e.Raw)
	}
	return l, l.loadPeopleAndNumbers()
}

// loadPeopleAndNumbers derives what writes need beyond the index: who owns
// new clients and where invoice numbering continues.
func (ts *loaded) loadPeopleAndNumbers() error {
	for _, e := range ts.col(practice.People) {
		var p practice.Person
		if err := json.Unmarshal(e.Raw, &p); err != nil {
			return fmt.Errorf("person %s: %w", e.ID, err)
		}
		if !p.Active || (p.Role != "partner" && p.Role != "manager") {
			continue
		}
		if ts.defaultOwner == "" && p.Role == "partner" {
			ts.defaultOwner = p.ID
		}
		ts.owners = append(ts.owners, p.ID)
	}
	if len(ts.owners) == 0 {
		return errors.New("no active partner or manager")
	}
	if ts.defaultOwner == "" {
		ts.defaultOwner = ts.owners[0]
	}
	for _, e := range ts.col(practice.Invoices) {
		var inv struct {
			Number string `json:"number"`
		}
		if err := json.Unmarshal(e.Raw, &inv); err != nil {
			return fmt.Errorf("invoice %s: %w", e.ID, err)
		}
		n, err := strconv.Atoi(strings.TrimPrefix(inv.Number, "INV-"))
		if err == nil && n > ts.lastInvoice {
			ts.lastInvoice = n
		}
	}
	return nil
}

// col returns a kind's entries; the caller holds mu or wmu.
func (ts *loaded) col(k practice.Kind) recordindex.Collection {
	i, _ := kindIndex(k)
	return ts.cols[i]
}

// find returns the entry with id, or nil; the caller holds mu or wmu and
// must not keep the pointer past it.
func (ts *loaded) find(k practice.Kind, id string) *entry {
	return ts.col(k).Find(id)
}

// upsert puts e into its kind's collection, keeping it sorted by id; the
// caller holds mu for writing.
func (ts *loaded) upsert(k practice.Kind, e entry) {
	ki, _ := kindIndex(k)
	ts.cols[ki].Upsert(e)
	switch k {
	case practice.Documents:
		ts.letters.Put(nil, e.ID, e.Raw)
	case practice.Engagements:
		ts.letters.PutEngagement(nil, e.ID, e.Raw)
	}
}

// linked answers a record of k as it is read: an engagement with its
// client's letters linked where the link is unambiguous, as a firm's real
// engagements are (practice.LinkLetters); the caller holds mu or wmu.
func (ts *loaded) linked(k practice.Kind, raw json.RawMessage) json.RawMessage {
	if k != practice.Engagements {
		return raw
	}
	return ts.letters.Link(raw)
}

// lookup returns the tenant's records, or ErrNotFound for a firm this
// adapter does not serve.
func (r *Records) lookup(t practice.Tenant) (*tenant, error) {
	ts := (*r.tenants.Load())[t]
	if ts == nil {
		return nil, fmt.Errorf("demo: no records for %s: %w", t, practice.ErrNotFound)
	}
	return ts, nil
}

var (
	_ practice.Reader       = (*Records)(nil)
	_ practice.ClientWriter = (*Records)(nil)
	_ practice.JobWriter    = (*Records)(nil)
)
