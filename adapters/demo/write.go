package demo

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/recordindex"
)

// CreateClient creates a client. Unset fields default to an active company
// in the firm's country, owned by the firm's first partner.
func (r *Records) CreateClient(ctx context.Context, t practice.Tenant, in practice.ClientInput) (json.RawMessage, error) {
	if err := in.Validate(true); err != nil {
		return nil, err
	}
	w, done, err := r.begin(t)
	if err != nil {
		return nil, err
	}
	defer done()
	c := practice.Client{
		Object:   practice.Clients.Singular(),
		Type:     "company",
		Status:   "active",
		Owner:    practice.Known(w.ts.defaultOwner),
		Country:  w.ts.style.code,
		Contacts: []practice.Contact{},
	}
	if err := w.applyClient(&c, in); err != nil {
		return nil, err
	}
	c.ID = r.ids.next(practice.Clients.IDPrefix(), w.now)
	c.CreatedAt = practice.KnownAt(w.now)
	return r.commitOne(ctx, w, practice.Clients, nil, c)
}

// UpdateClient changes the fields of in that are set. Any write is client
// activity, so last_activity_at moves with updated_at.
func (r *Records) UpdateClient(ctx context.Context, t practice.Tenant, id string, in practice.ClientInput) (json.RawMessage, error) {
	if err := in.Validate(false); err != nil {
		return nil, err
	}
	w, done, err := r.begin(t)
	if err != nil {
		return nil, err
	}
	defer done()
	var c practice.Client
	before, err := w.load(practice.Clients, id, &c)
	if err != nil {
		return nil, err
	}
	if err := w.applyClient(&c, in); err != nil {
		return nil, err
	}
	return r.commitOne(ctx, w, practice.Clients, before, c)
}

func (w *write) applyClient(c *practice.Client, in practice.ClientInput) error {
	set(&c.Name, in.Name)
	set(&c.Type, in.Type)
	set(&c.Status, in.Status)
	setKnown(&c.Owner, in.Owner)
	set(&c.Email, in.Email)
	set(&c.Phone, in.Phone)
	if in.Country != nil {
		c.Country = strings.ToUpper(*in.Country)
	}
	if in.Contacts != nil {
		c.Contacts = append([]practice.Contact{}, *in.Contacts...)
	}
	if _, ok := w.entry(practice.People, practice.ValueOf(c.Owner)); !ok {
		return practice.Invalid("owner", "There is no person %s at this firm.", practice.ValueOf(c.Owner))
	}
	c.UpdatedAt, c.LastActivityAt = w.now, w.now
	return nil
}

// CreateJob creates a planned job, owned by its client's owner unless in
// names another.
func (r *Records) CreateJob(ctx context.Context, t practice.Tenant, in practice.JobInput) (json.RawMessage, error) {
	if err := in.Validate(true); err != nil {
		return nil, err
	}
	w, done, err := r.begin(t)
	if err != nil {
		return nil, err
	}
	defer done()
	j := practice.Job{Object: practice.Jobs.Singular(), Stage: "planned"}
	if in.Owner == nil {
		if c, ok := w.entry(practice.Clients, *in.Client); ok {
			j.Owner = practice.Known(c.Owner)
		}
	}
	if err := w.applyJob(&j, in); err != nil {
		return nil, err
	}
	j.ID = r.ids.next(practice.Jobs.IDPrefix(), w.now)
	j.CreatedAt = practice.KnownAt(w.now)
	if _, err := w.put(practice.Jobs, nil, j, ""); err != nil {
		return nil, err
	}
	return r.commitFirst(ctx, w)
}

// UpdateJob changes the fields of in that are set. Its stage moves only
// through MoveJob.
func (r *Records) UpdateJob(ctx context.Context, t practice.Tenant, id string, in practice.JobInput) (json.RawMessage, error) {
	if err := in.Validate(false); err != nil {
		return nil, err
	}
	w, done, err := r.begin(t)
	if err != nil {
		return nil, err
	}
	defer done()
	var j practice.Job
	before, err := w.load(practice.Jobs, id, &j)
	if err != nil {
		return nil, err
	}
	if err := w.applyJob(&j, in); err != nil {
		return nil, err
	}
	if _, err := w.put(practice.Jobs, before, j, ""); err != nil {
		return nil, err
	}
	return r.commitFirst(ctx, w)
}

// applyJob sets the fields of in that are set and checks that the job's
// links still hold: its client and owner exist, and its engagement is its
// client's. The engagement does not list the job in released_jobs: no
// proposal system links its jobs, so an engagement of a firm's real
// systems never does either.
func (w *write) applyJob(j *practice.Job, in practice.JobInput) error {
	set(&j.Title, in.Title)
	set(&j.Type, in.Type)
	setKnown(&j.Client, in.Client)
	set(&j.Engagement, in.Engagement)
	setKnown(&j.Owner, in.Owner)
	set(&j.Deadline, in.Deadline)
	client, owner := practice.ValueOf(j.Client), practice.ValueOf(j.Owner)
	if _, ok := w.entry(practice.Clients, client); !ok {
		return practice.Invalid("client", "There is no client %s at this firm.", client)
	}
	if _, ok := w.entry(practice.People, owner); !ok {
		return practice.Invalid("owner", "There is no person %s at this firm.", owner)
	}
	if j.Engagement != "" {
		e, ok := w.entry(practice.Engagements, j.Engagement)
		if !ok {
			return practice.Invalid("engagement", "There is no engagement %s at this firm.", j.Engagement)
		}
		if e.Client != client {
			return practice.Invalid("engagement", "Engagement %s is for another client than %s.", j.Engagement, client)
		}
	}
	j.UpdatedAt = w.now
	return nil
}

// MoveJob moves a job to a stage. A move to the stage it is in is still a
// move: it is recorded with its note.
func (r *Records) MoveJob(ctx context.Context, t practice.Tenant, id string, move practice.StageMove) (json.RawMessage, error) {
	if err := move.Validate(); err != nil {
		return nil, err
	}
	w, done, err := r.begin(t)
	if err != nil {
		return nil, err
	}
	defer done()
	var j practice.Job
	before, err := w.load(practice.Jobs, id, &j)
	if err != nil {
		return nil, err
	}
	moveJob(&j, move.Stage, w.now)
	if _, err := w.put(practice.Jobs, before, j, move.Note); err != nil {
		return nil, err
	}
	return r.commitFirst(ctx, w)
}

// moveJob sets a job's stage. closed_at is when the job closed: it is set on
// closing, kept on a move between closed stages and cleared on reopening.
func moveJob(j *practice.Job, stage string, now time.Time) {
	switch {
	case !practice.ClosedStage(stage):
		j.ClosedAt = nil
	case j.ClosedAt == nil:
		j.ClosedAt = &now
	}
	j.Stage = stage
	j.UpdatedAt = now
}

func set(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}

// setKnown sets a nullable field when v is set.
func setKnown(dst **string, v *string) {
	if v != nil {
		*dst = practice.Known(*v)
	}
}

// write is one write in progress on a tenant. The records it has changed so
// far shadow the index, so a write that touches a record twice (a trigger
// that creates an engagement and signs it) sees its own changes; and the
// tenant's writes submitted but not yet committed shadow it too (flight), so
// that a write computes from the state the writes before it leave, whether
// or not their commit is done.
type write struct {
	ts      *tenant
	now     time.Time
	pending []pending
	// locked says the write holds ts.wmu; release gives it up once.
	locked bool
}

// release gives up the tenant's write lock, if the write still holds it.
func (w *write) release() {
	if w.locked {
		w.locked = false
		w.ts.wmu.Unlock()
	}
}

// pending is one record a write stores, with the state it replaces.
type pending struct {
	kind   practice.Kind
	entry  entry
	before json.RawMessage // nil for a new record
	note   string
}

// begin starts a write on t. The caller calls done when finished, after
// committing or not.
func (r *Records) begin(t practice.Tenant) (w *write, done func(), err error) {
	ts, err := r.lookup(t)
	if err != nil {
		return nil, nil, err
	}
	ts.wmu.Lock()
	if err := r.loadLocked(ts); err != nil {
		ts.wmu.Unlock()
		return nil, nil, err
	}
	now := r.clock()
	ts.touch(now)
	w = &write{ts: ts, now: now, locked: true}
	return w, w.release, nil
}

// entry returns the current state of a record.
func (w *write) entry(k practice.Kind, id string) (entry, bool) {
	for i := len(w.pending) - 1; i >= 0; i-- {
		if p := &w.pending[i]; p.kind == k && p.entry.ID == id {
			return p.entry, true
		}
	}
	if f, ok := w.ts.flight[flightKey{k, id}]; ok {
		return f.entry, true
	}
	if e := w.ts.find(k, id); e != nil {
		return *e, true
	}
	return entry{}, false
}

// load decodes the current state of a record into v and returns its
// encoding, to be the change's before.
func (w *write) load(k practice.Kind, id string, v any) (json.RawMessage, error) {
	e, ok := w.entry(k, id)
	if !ok {
		return nil, notFound(k, id)
	}
	if err := json.Unmarshal(e.Raw, v); err != nil {
		return nil, fmt.Errorf("demo: decode %s %s: %w", k.Singular(), id, err)
	}
	return e.Raw, nil
}

// put adds a record's new state to the write and returns its encoding.
func (w *write) put(k practice.Kind, before json.RawMessage, rec any, note string) (json.RawMessage, error) {
	v, err := nextVersion(before)
	if err != nil {
		return nil, fmt.Errorf("demo: %s: %w", k.Singular(), err)
	}
	raw, err := practice.Marshal(withVersion(rec, v))
	if err != nil {
		return nil, fmt.Errorf("demo: encode %s: %w", k.Singular(), err)
	}
	e, err := recordindex.NewEntry(raw)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	w.pending = append(w.pending, pending{kind: k, entry: e, before: before, note: note})
	return raw, nil
}

// commitOne stores one record and returns its encoding.
func (r *Records) commitOne(ctx context.Context, w *write, k practice.Kind, before json.RawMessage, rec any) (json.RawMessage, error) {
	if _, err := w.put(k, before, rec, ""); err != nil {
		return nil, err
	}
	return r.commitFirst(ctx, w)
}

// commitFirst commits w and returns the first record it stored.
func (r *Records) commitFirst(ctx context.Context, w *write) (json.RawMessage, error) {
	if _, err := r.commit(ctx, w); err != nil {
		return nil, err
	}
	return w.pending[0].entry.Raw, nil
}

// commit stores every record of w and hands one change per record to the
// change log, in one transaction, so that no change is ever stored without
// its event or the reverse. Only then does the index show the new records.
//
// The tenant's write lock is held while the write is computed and
// submitted, not while it commits: the tenant's writes are computed one at
// a time, each from the state the ones before it leave (their records stay
// in flight until committed), and committed together, many to an fsync.
// The transaction checks that each record it replaces is still the one the
// write was computed from, so a write computed from one whose commit then
// failed fails too, rather than storing over what it never saw.
func (r *Records) commit(ctx context.Context, w *write) ([]practice.Change, error) {
	defer w.release()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ts := w.ts
	changes := make([]practice.Change, len(w.pending))
	for i, p := range w.pending {
		changes[i] = practice.Change{
			ID:         r.ids.next("chg_", w.now),
			Firm:       ts.Firm,
			Sandbox:    ts.Sandbox,
			Kind:       p.kind,
			ResourceID: p.entry.ID,
			Before:     p.before,
			After:      p.entry.Raw,
			Note:       p.note,
			OccurredAt: w.now,
		}
	}
	appendChanges, err := r.changeLog().Log(changes)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	// logged settles what the change log's last successful run reported.
	var logged func(committed bool)
	store := func(tx *bbolt.Tx) error {
		tb := tenantBucket(tx, ts.Tenant)
		if tb == nil {
			return errors.New("buckets are missing")
		}
		for _, p := range w.pending {
			kb := tb.Bucket([]byte(p.kind))
			if kb == nil {
				return fmt.Errorf("no %s bucket", p.kind)
			}
			// The record must be as the write found it (bbolt shows a
			// transaction its own writes, so a record the write changed
			// twice compares with its first change).
			if !bytes.Equal(kb.Get([]byte(p.entry.ID)), p.before) {
				return fmt.Errorf("%s %s changed under the write: an earlier write failed", p.kind.Singular(), p.entry.ID)
			}
			if err := kb.Put([]byte(p.entry.ID), p.entry.Raw); err != nil {
				return fmt.Errorf("store %s: %w", p.entry.ID, err)
			}
		}
		l, err := appendChanges(tx)
		if err != nil {
			return err
		}
		logged = l
		return nil
	}
	settled := func(err error) {
		ts.wmu.Lock()
		ts.mu.Lock()
		for _, p := range w.pending {
			if err == nil && ts.loaded.ok {
				ts.upsert(p.kind, p.entry)
			}
		}
		ts.land(w)
		ts.mu.Unlock()
		ts.wmu.Unlock()
		if logged != nil {
			logged(err == nil)
		}
	}
	ts.fly(w)
	op := r.c.Submit(store, settled)
	w.release()
	if err := op.Wait(); err != nil {
		return nil, fmt.Errorf("demo: commit to %s: %w", ts, err)
	}
	return changes, nil
}

func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}

func notFound(k practice.Kind, id string) error {
	return fmt.Errorf("demo: %s %q: %w", k.Singular(), id, practice.ErrNotFound)
}

// nextVersion is the version a record written over before takes: one more
// than before's, 1 for a new record. The write and its change commit
// together, so the event's object carries the version the API answers.
func nextVersion(before json.RawMessage) (int64, error) {
	if before == nil {
		return 1, nil
	}
	var prior struct {
		Version int64 `json:"version"`
	}
	if err := json.Unmarshal(before, &prior); err != nil {
		return 0, fmt.Errorf("reading the version written before: %w", err)
	}
	return prior.Version + 1, nil
}

// withVersion is rec with version v.
func withVersion(rec any, v int64) any {
	switch r := rec.(type) {
	case practice.Client:
		r.Version = v
		return r
	case practice.Engagement:
		r.Version = v
		return r
	case practice.Job:
		r.Version = v
		return r
	case practice.Document:
		r.Version = v
		return r
	case practice.Invoice:
		r.Version = v
		return r
	case practice.Person:
		r.Version = v
		return r
	}
	panic(fmt.Sprintf("demo: a record of type %T has no version", rec))
}
