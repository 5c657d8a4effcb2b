package firms

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// table is what serves each kind of a firm's live records on this
// instance, and its writes: decided in one place (decide) from the firm's
// Caddyfile systems and the connections open here, replaced whole by the
// follow loop, read by every request.
type table struct {
	kinds map[practice.Kind]source
	// other serves a kind outside the contract's, as the records
	// system's role would.
	other   source
	clients practice.ClientWriter
	jobs    practice.JobWriter
	// conns are the firm's connections open here, by role; unserved are
	// the roles a connection should serve and none does here, and what
	// their reads answer rather than demo records: the firm disconnected
	// the role's system, or it cannot be opened.
	conns    map[string]*system
	unserved map[string]unserved
	// engagements is the role whose system keeps the firm's engagements
	// (none when none does): as its Caddyfile systems say until its
	// connections are followed, then as they and its connections say
	// (engagementsRole).
	engagements string
	followed    bool
}

// source is what serves one kind: the copy of the system that keeps it,
// or a reader that is no copy (the demo records, or why none serves it).
type source struct {
	sys *system
	// none is set for engagements no system keeps: answered as none by
	// the copy that serves the firm's clients (firmsystem.NoEngagements).
	none   bool
	reader practice.Reader
}

// newTable is a table with no connection open.
func newTable() *table {
	return &table{conns: map[string]*system{}, unserved: map[string]unserved{}}
}

// opened is connection id when it is open here.
func (t *table) opened(id string) *system {
	for _, c := range t.conns {
		if c.conn.ID == id {
			return c
		}
	}
	return nil
}

// role is the role whose system serves k: engagements come from the
// system that keeps the firm's proposals, once the connections are
// followed.
func (t *table) role(k practice.Kind) string {
	if k == practice.Engagements && t.followed && t.engagements == firmsystem.EngagementsLedger {
		return t.engagements
	}
	return roleOf(k)
}

// roleOf is the role whose system serves k.
func roleOf(k practice.Kind) string {
	switch k {
	case practice.Invoices:
		return "ledger"
	case practice.Documents:
		return "documents"
	}
	return "records"
}

// decide fills next, the firm's connections open here (or why a role's
// are not) and, when followed, the engagements role they give, with what
// serves each kind: the Caddyfile's system that keeps it; else the
// connection of its role (or why none serves it); else the demo records
// where the firm's block sets the role to demo; else nothing, the firm
// has no system connected in that role. The engagements of a firm none
// of whose systems keeps proposals are the answer of none by whatever
// serves its clients.
func (f *firm) decide(next *table, followed bool) *table {
	next.followed = followed
	if !followed || f.keeping(practice.Engagements) != nil {
		next.engagements = f.engagements
	}
	next.kinds = map[practice.Kind]source{}
	for _, k := range practice.Kinds {
		next.kinds[k] = f.source(next, k)
	}
	next.other = f.source(next, "")
	if next.engagements == firmsystem.EngagementsNone {
		clients := next.kinds[practice.Clients]
		next.kinds[practice.Engagements] = source{sys: clients.sys, none: clients.sys != nil, reader: clients.reader}
	}
	next.clients, next.jobs = f.writers(next)
	return next
}

// source is what serves k, engagements apart.
func (f *firm) source(t *table, k practice.Kind) source {
	if s := f.keeping(k); s != nil {
		return source{sys: s}
	}
	role := t.role(k)
	if c := t.conns[role]; c != nil && c.keeps(k) {
		return source{sys: c}
	}
	if u, ok := t.unserved[role]; ok {
		return source{reader: u}
	}
	if !f.demo[role] {
		return source{reader: notConnected(role)}
	}
	return source{reader: f.demoRecords}
}

// writers take the writes of clients and jobs: the Caddyfile's records
// system, else the records connection's (none while it waits for its
// administrator: its vendor would refuse them, or they would go to an
// organisation about to be replaced), else the demo records where the
// firm's block sets them.
func (f *firm) writers(t *table) (practice.ClientWriter, practice.JobWriter) {
	if s := f.keeping(practice.Clients); s != nil {
		return s.opened.Clients, s.opened.Jobs
	}
	if c := t.conns["records"]; c != nil {
		var clients practice.ClientWriter = reconnecting("records")
		var jobs practice.JobWriter = reconnecting("records")
		if !c.paused() && c.opened.Clients != nil {
			clients = c.opened.Clients
		}
		if !c.paused() && c.opened.Jobs != nil {
			jobs = c.opened.Jobs
		}
		return clients, jobs
	}
	if u, ok := t.unserved["records"]; ok {
		return u, u
	}
	if !f.demo["records"] {
		return notConnected("records"), notConnected("records")
	}
	return f.demoRecords, f.demoRecords
}

// reader is what serves k now: a copy where the firm is held, the same
// copy loaded from the shared store for the read where it is not (no
// holder took the request).
func (f *firm) reader(k practice.Kind) practice.Reader {
	t := f.table.Load()
	s, ok := t.kinds[k]
	if !ok {
		s = t.other
	}
	if s.sys == nil {
		return s.reader
	}
	var r practice.Reader = s.sys.model
	if !f.holds() {
		r = storeServed{s.sys.model}
	}
	if s.none {
		return firmsystem.NoEngagements{Reader: r}
	}
	return r
}

// fromModel reports whether k is answered from one of the firm's copies
// here: what a holder answers.
func (f *firm) fromModel(k practice.Kind) bool {
	return f.table.Load().kinds[k].sys != nil
}

// Served is what serves one tenant's records: a live tenant's firm, or the
// demo records for a sandbox.
type Served struct {
	f    *firm
	demo Demo
}

// Reader serves kind k.
func (s Served) Reader(k practice.Kind) practice.Reader {
	if s.f == nil {
		return s.demo
	}
	return s.f.reader(k)
}

// Clients takes the writes of clients.
func (s Served) Clients() practice.ClientWriter {
	if s.f == nil {
		return s.demo
	}
	return s.f.clients()
}

// Jobs takes the writes of jobs.
func (s Served) Jobs() practice.JobWriter {
	if s.f == nil {
		return s.demo
	}
	return s.f.jobs()
}

// clients and jobs take the firm's writes now.
func (f *firm) clients() practice.ClientWriter { return f.table.Load().clients }
func (f *firm) jobs() practice.JobWriter       { return f.table.Load().jobs }

// storeServed is a firm's copy on an instance that does not hold it,
// answering a read no holder could take (none is live, or the bounds hold
// the firm fewer times than asked): the model loads the firm from the
// shared store for it, and the answer says lagging, since no sync runs
// here to vouch for it.
type storeServed struct{ *readmodel.Model }

// storeServedReads counts the reads answered from the store, for
// /metrics; process-wide, so a reload keeps counting.
var storeServedReads atomic.Uint64

func (s storeServed) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	storeServedReads.Add(1)
	return s.Model.List(ctx, t, k, q)
}

func (s storeServed) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	storeServedReads.Add(1)
	return s.Model.Get(ctx, t, k, id)
}

// Freshness is the model's, lagging.
func (s storeServed) Freshness(k practice.Kind) (practice.Freshness, bool) {
	f, ok := s.Model.Freshness(k)
	f.State = readmodel.StateLagging
	return f, ok
}

// unserved answers every read and write of a role no system serves
// here, with err: a clear error rather than the demo records.
type unserved struct{ err error }

// notConnected is a role no system serves: the firm's block sets none
// and no connection of it has connected (or it was disconnected).
func notConnected(role string) unserved {
	return unserved{fmt.Errorf("the firm has no %s system: %w", role, practice.ErrNotConnected)}
}

// reconnecting takes the writes of a role whose connection waits for its
// administrator; its reads answer from the copy.
func reconnecting(role string) unserved {
	return unserved{fmt.Errorf("the firm's %s connection waits to be reconnected: %w", role, practice.ErrReconnecting)}
}

// notOpened is a role whose connected system this instance cannot open
// (its app left the connect block, its secrets are unreadable): the
// vendor is out of reach, as an outage would leave it.
func notOpened(role string) unserved {
	return unserved{fmt.Errorf("the firm's connected %s system cannot be reached: %w", role, practice.ErrUnavailable)}
}

func (u unserved) List(context.Context, practice.Tenant, practice.Kind, practice.Query) (practice.Page, error) {
	return practice.Page{}, u.err
}

func (u unserved) Get(context.Context, practice.Tenant, practice.Kind, string) (json.RawMessage, error) {
	return nil, u.err
}

func (u unserved) CreateClient(context.Context, practice.Tenant, practice.ClientInput) (json.RawMessage, error) {
	return nil, u.err
}

func (u unserved) UpdateClient(context.Context, practice.Tenant, string, practice.ClientInput) (json.RawMessage, error) {
	return nil, u.err
}

func (u unserved) CreateJob(context.Context, practice.Tenant, practice.JobInput) (json.RawMessage, error) {
	return nil, u.err
}

func (u unserved) UpdateJob(context.Context, practice.Tenant, string, practice.JobInput) (json.RawMessage, error) {
	return nil, u.err
}

func (u unserved) MoveJob(context.Context, practice.Tenant, string, practice.StageMove) (json.RawMessage, error) {
	return nil, u.err
}
