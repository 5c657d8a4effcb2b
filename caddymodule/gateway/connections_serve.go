package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

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
	// disconnected are the roles whose newest connection was
	// disconnected: reads of them say so rather than answer demo
	// records.
	disconnected map[string]bool
}

// reader is what serves k from the firm's connections: the live
// connection of k's role, or a reader saying the firm disconnected it;
// nil when neither.
func (s *connSet) reader(k practice.Kind) practice.Reader {
	if s == nil {
		return nil
	}
	if c := s.byRole[roleOf(k)]; c != nil && c.model.Owns(k) {
		return c.model
	}
	if s.disconnected[roleOf(k)] {
		return notConnected{role: roleOf(k)}
	}
	return nil
}

// clients and jobs take the writes of the records connection, or say
// the firm disconnected it; nil when neither.
func (s *connSet) clients() practice.ClientWriter {
	if s == nil {
		return nil
	}
	if c := s.byRole["records"]; c != nil && c.clients != nil {
		return c.clients
	}
	if s.disconnected["records"] {
		return notConnected{role: "records"}
	}
	return nil
}

func (s *connSet) jobs() practice.JobWriter {
	if s == nil {
		return nil
	}
	if c := s.byRole["records"]; c != nil && c.jobs != nil {
		return c.jobs
	}
	if s.disconnected["records"] {
		return notConnected{role: "records"}
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

// notConnected answers every read of a role whose system the firm
// disconnected: a clear error until another is connected.
type notConnected struct{ role string }

func (n notConnected) err() error {
	return fmt.Errorf("the firm disconnected its %s system: %w", n.role, practice.ErrNotConnected)
}

func (n notConnected) List(context.Context, practice.Tenant, practice.Kind, practice.Query) (practice.Page, error) {
	return practice.Page{}, n.err()
}

func (n notConnected) Get(context.Context, practice.Tenant, practice.Kind, string) (json.RawMessage, error) {
	return nil, n.err()
}

func (n notConnected) CreateClient(context.Context, practice.Tenant, practice.ClientInput) (json.RawMessage, error) {
	return nil, n.err()
}

func (n notConnected) UpdateClient(context.Context, practice.Tenant, string, practice.ClientInput) (json.RawMessage, error) {
	return nil, n.err()
}

func (n notConnected) CreateJob(context.Context, practice.Tenant, practice.JobInput) (json.RawMessage, error) {
	return nil, n.err()
}

func (n notConnected) UpdateJob(context.Context, practice.Tenant, string, practice.JobInput) (json.RawMessage, error) {
	return nil, n.err()
}

func (n notConnected) MoveJob(context.Context, practice.Tenant, string, practice.StageMove) (json.RawMessage, error) {
	return nil, n.err()
}

// State is what this instance knows of a connection's use, for its view:
// the last time its vendor answered with success, and each of its syncs.
func (a *App) State(c connection.Connection) (lastSuccess *time.Time, syncs []connection.SyncState) {
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
		s := connection.SyncState{Role: st.Role, State: st.State, Progress: st.Progress()}
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
			st.State, st.Why = readmodel.StateFailing, "the connection needs reconnecting"
			for i := range st.Kinds {
				st.Kinds[i].State, st.Kinds[i].Why = readmodel.StateFailing, st.Why
			}
		}
		out = append(out, st)
	}
	return out
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
