package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/caddymodule/health"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// What a firm's connections serve on this instance: its reads and writes,
// its view, readiness and metrics.

// connSet is what a firm's connections serve on this instance: replaced
// whole by the follow loop, read by every request.
type connSet struct {
	byRole map[string]*connSystem
	// unserved are the roles a connection should serve and none does
	// here, and what their reads answer rather than demo records: the
	// firm disconnected the role's system, or it cannot be opened.
	unserved map[string]unserved
	// engagements is the role whose system keeps the firm's engagements,
	// as the firm's systems and connections say (engagementsRole): none
	// when none does.
	engagements string
}

func newConnSet() *connSet {
	return &connSet{byRole: map[string]*connSystem{}, unserved: map[string]unserved{}}
}

// reader is what serves k from the firm's connections: the live
// connection of k's role, or a reader saying why none serves it; nil
// when no connection should.
func (s *connSet) reader(k practice.Kind) practice.Reader {
	if s == nil {
		return nil
	}
	if c := s.byRole[s.role(k)]; c != nil && c.model.Owns(k) {
		return c.model
	}
	if u, ok := s.unserved[s.role(k)]; ok {
		return u
	}
	return nil
}

// role is the role whose system serves k: engagements come from the
// system that keeps the firm's proposals.
func (s *connSet) role(k practice.Kind) string {
	if k == practice.Engagements && s != nil && (s.engagements == firmsystem.EngagementsLedger) {
		return s.engagements
	}
	return roleOf(k)
}

// clients and jobs take the writes of the records connection, or say
// why none does; nil when no connection should. A connection that waits
// for its administrator takes none: its vendor would refuse them, or
// they would go to an organisation about to be replaced.
func (s *connSet) clients() practice.ClientWriter {
	if s == nil {
		return nil
	}
	if c := s.byRole["records"]; c != nil {
		if c.paused() || c.clients == nil {
			return reconnecting("records")
		}
		return c.clients
	}
	if u, ok := s.unserved["records"]; ok {
		return u
	}
	return nil
}

func (s *connSet) jobs() practice.JobWriter {
	if s == nil {
		return nil
	}
	if c := s.byRole["records"]; c != nil {
		if c.paused() || c.jobs == nil {
			return reconnecting("records")
		}
		return c.jobs
	}
	if u, ok := s.unserved["records"]; ok {
		return u
	}
	return nil
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

// Use is what this instance knows of a connection's use, for its view:
// the last time its vendor answered with success, and each of its syncs.
func (a *App) Use(c connection.Connection) (lastSuccess *time.Time, syncs []connection.SyncStatus) {
	b, ok := a.firms[c.Firm]
	if !ok {
		return nil, nil
	}
	cs := b.conns.Load().opened(c.ID)
	if cs == nil {
		return nil, nil
	}
	if cs.upstream.client != nil {
		if t := cs.upstream.client.LastSuccess(); !t.IsZero() {
			lastSuccess = &t
		}
	}
	for _, st := range cs.status() {
		s := connection.SyncStatus{Role: st.Role, State: st.State, Progress: st.Progress()}
		if cs.paused() {
			s.State = "paused"
		}
		if !st.ConfirmedAt.IsZero() {
			t := st.ConfirmedAt
			s.ConfirmedAt = &t
		}
		syncs = append(syncs, s)
	}
	return lastSuccess, syncs
}

// status is c's syncs as this instance reports them: a paused one is
// failing, for the connection's sake and never the vendor's words.
func (c *connSystem) status() []readmodel.Status {
	out := make([]readmodel.Status, 0, len(c.syncs))
	for _, s := range c.syncs {
		st := s.Status()
		if c.paused() {
			// The connection's reason is the gateway's words, never the
			// vendor's.
			st.State, st.Why = readmodel.StateFailing, c.waitReason()
			for i := range st.Kinds {
				st.Kinds[i].State, st.Kinds[i].Why = readmodel.StateFailing, st.Why
			}
		}
		out = append(out, st)
	}
	return out
}

// models are the firm's read models on this instance: its Caddyfile
// systems' and those of its connections open here. The placement holds
// them together: where the firm is held they are loaded and synced, and
// elsewhere they are not.
func (b *firmBackends) models() []*readmodel.Model {
	var out []*readmodel.Model
	if b.model != nil {
		out = append(out, b.model)
	}
	for _, c := range b.connections() {
		out = append(out, c.model)
	}
	return out
}

// size is what the firm's models hold in memory here.
func (b *firmBackends) size() readmodel.Size {
	var s readmodel.Size
	for _, m := range b.models() {
		ms := m.Size()
		s.Records += ms.Records
		s.Bytes += ms.Bytes
	}
	return s
}

// servesFromModel reports whether one of the firm's read models serves k here:
// its Caddyfile system's, or its connection's of k's role.
func (b *firmBackends) servesFromModel(k practice.Kind) bool {
	if k == practice.Engagements && b.engagementsFrom() == firmsystem.EngagementsNone {
		// Answered by the records' copy (noEngagements).
		k = practice.Clients
	}
	if b.model != nil && b.model.Owns(k) {
		return true
	}
	c := b.conns.Load()
	return c != nil && c.byRole[c.role(k)] != nil && c.byRole[c.role(k)].model.Owns(k)
}

// connections are a firm's connections open here, in role order.
func (b *firmBackends) connections() []*connSystem {
	cur := b.conns.Load()
	if cur == nil {
		return nil
	}
	var out []*connSystem
	for _, role := range roles {
		if c := cur.byRole[role]; c != nil {
			out = append(out, c)
		}
	}
	return out
}

// allConnections are the configured firms' connections as the store last
// said, oldest first.
func (a *App) allConnections() []connection.Connection {
	list := a.follow.known.Load()
	if list == nil {
		return nil
	}
	var out []connection.Connection
	for _, c := range *list {
		if _, ok := a.firms[c.Firm]; ok {
			out = append(out, c)
		}
	}
	return out
}

// connectionChecks report each live connection in /readyz by its status
// alone: a reason may quote the vendor. A connection affects one firm's
// role, so it is not critical.
func (a *App) connectionChecks() []health.Check {
	var checks []health.Check
	for _, c := range a.allConnections() {
		if !c.Live() {
			continue
		}
		checks = append(checks, health.Check{Name: "connection " + c.System + "/" + c.Firm,
			OK: c.Status == connection.Connected, Detail: string(c.Status)})
	}
	slices.SortFunc(checks, func(x, y health.Check) int { return strings.Compare(x.Name, y.Name) })
	return checks
}
