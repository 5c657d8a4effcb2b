package firms

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// SyncStatus reports each of a firm's syncs here, its Caddyfile systems'
// then its connections', for the console, the admin routes and /readyz.
func (r *Runtime) SyncStatus(id string) []readmodel.Status {
	f := r.firm(id)
	if f == nil {
		return nil
	}
	var out []readmodel.Status
	for _, s := range f.systems {
		out = append(out, s.status()...)
	}
	for _, c := range f.connections() {
		out = append(out, c.status()...)
	}
	return out
}

// status is s's syncs as this instance reports them: a paused
// connection's are failing, for the connection's sake and never the
// vendor's words.
func (s *system) status() []readmodel.Status {
	out := make([]readmodel.Status, 0, len(s.syncs))
	for _, sync := range s.syncs {
		st := sync.Status()
		if s.paused() {
			// The connection's reason is the gateway's words, never the
			// vendor's.
			st.State, st.Why = readmodel.StateFailing, s.waitReason()
			for i := range st.Kinds {
				st.Kinds[i].State, st.Kinds[i].Why = readmodel.StateFailing, st.Why
			}
		}
		st.Links = s.links()
		out = append(out, st)
	}
	return out
}

// allSyncStatus is every firm system's sync, by firm.
func (r *Runtime) allSyncStatus() []readmodel.Status {
	ids := slices.Sorted(slices.Values(r.order))
	var out []readmodel.Status
	for _, id := range ids {
		out = append(out, r.SyncStatus(id)...)
	}
	return out
}

// Resync asks a firm system's sync to reconcile now, wherever it runs;
// system is its role or its system's name.
func (r *Runtime) Resync(ctx context.Context, id, system string) error {
	f := r.firm(id)
	if f == nil {
		return errNoFirm(id)
	}
	for _, s := range append(slices.Clone(f.systems), f.connections()...) {
		for _, sync := range s.syncs {
			if sync.Role() == system || sync.System() == system {
				return sync.Resync(ctx)
			}
		}
	}
	return fmt.Errorf("firm %s has no real %s system: %w", id, system, practice.ErrNotFound)
}

// Use is what this instance knows of a connection's use, for its view:
// the last time its vendor answered with success, and each of its syncs.
func (r *Runtime) Use(c connection.Connection) (lastSuccess *time.Time, syncs []connection.SyncStatus) {
	f := r.firm(c.Firm)
	if f == nil {
		return nil, nil
	}
	cs := f.table.Load().opened(c.ID)
	if cs == nil {
		return nil, nil
	}
	if client := cs.opened.Client; client != nil {
		if t := client.LastSuccess(); !t.IsZero() {
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

// Roles says how each of a firm's roles is served, by the rules its
// reads follow: the firm's Caddyfile system first, else its newest
// connection (connected, or its copy held while it waits for its
// administrator), else the demo records where the firm's block sets the
// role to demo, else nothing (system_not_connected).
func (r *Runtime) Roles(id string) []adminapi.RoleView {
	f := r.firm(id)
	if f == nil {
		return []adminapi.RoleView{}
	}
	want := wantedConnections(r.allConnections())[id]
	out := make([]adminapi.RoleView, 0, len(roles))
	for _, role := range roles {
		v := adminapi.RoleView{Role: role}
		w := want[role]
		if w.conn != nil {
			v.Connection, v.Status, v.System = w.conn.ID, string(w.conn.Status), w.conn.System
		}
		switch how := w.serving(); {
		case f.sets(role):
			v.Source, v.System = adminapi.SourceCaddyfile, f.systemIn(role)
		case f.serves(role):
			// The records system keeps the role's kinds (XPM's invoices
			// for a firm that names no ledger).
			v.Source, v.System = adminapi.SourceCaddyfile, f.systemIn("records")
		case how.open():
			v.Source = adminapi.SourceConnection
		case f.demo[role] && how == servedByNone:
			v.Source = adminapi.SourceDemo
		default:
			v.Source = adminapi.SourceNotConnected
		}
		out = append(out, v)
	}
	return out
}

// systemIn is the system the firm's block names in role.
func (f *firm) systemIn(role string) string {
	for _, s := range f.systems {
		if s.role == role {
			return s.name
		}
	}
	return ""
}

// Check is one of the runtime's checks of /readyz: what caddymodule/health
// reports, made of it by the gateway. None is critical: each affects one
// firm's role. Detail is for anyone who can reach the probe; Err, the
// error behind it, for the log and the admin endpoint only.
type Check struct {
	Name   string
	OK     bool
	Detail string
	Err    error
}

// Checks are the runtime's checks: each Caddyfile system's circuit
// breaker, each sync, and each live connection by its status.
func (r *Runtime) Checks(now time.Time) []Check {
	var upstreams, syncs, conns []Check
	for _, id := range r.order {
		for _, s := range r.firms[id].systems {
			if s.opened.Client == nil {
				continue
			}
			state := s.opened.Client.BreakerState()
			upstreams = append(upstreams, Check{Name: "upstream " + s.name + "/" + id, OK: state != "open", Detail: "circuit breaker " + state})
		}
	}
	for _, st := range r.allSyncStatus() {
		syncs = append(syncs, syncCheck(st, now))
	}
	for _, c := range r.allConnections() {
		if c.Live() {
			// By its status alone: a reason may quote the vendor.
			conns = append(conns, Check{Name: "connection " + c.System + "/" + c.Firm, OK: c.Status == connection.Connected,
				Detail: string(c.Status)})
		}
	}
	var out []Check
	for _, checks := range [][]Check{upstreams, syncs, conns} {
		slices.SortFunc(checks, func(x, y Check) int { return strings.Compare(x.Name, y.Name) })
		out = append(out, checks...)
	}
	return out
}

// syncCheck is one sync as the public probe shows it: its state, the
// backfill's figures and the age of its data, never why it lags or fails.
// The why is the vendor's own words (request paths, paging tokens, a piece
// of its answer), so it goes only to the log (as the check's Err), the
// admin endpoint and the firm's console.
func syncCheck(st readmodel.Status, now time.Time) Check {
	detail := st.State
	if st.State == readmodel.StateBackfilling {
		if p := st.Progress(); p != "" {
			detail += ": " + p
		}
	}
	if !st.ConfirmedAt.IsZero() {
		detail += fmt.Sprintf("; data confirmed %s ago", st.Age(now).Round(time.Second))
	}
	if plan := st.Plan.String(); plan != "" {
		detail += "; " + plan
	}
	c := Check{Name: "sync " + st.System + "/" + st.Firm, OK: st.State != readmodel.StateFailing, Detail: detail}
	if st.Why != "" {
		c.Err = errors.New(st.Why)
	}
	return c
}

// SweepTombstones forgets the tombstones the firms' copies held here
// keep beyond practice.TombstoneRetention. Every instance sweeps: the
// sweep is idempotent, and none has to be the one that does it.
func (r *Runtime) SweepTombstones(ctx context.Context, now time.Time) {
	before := now.Add(-practice.TombstoneRetention)
	for _, id := range r.order {
		for _, s := range r.firms[id].systems {
			if !s.model.Loaded() {
				// A firm held elsewhere is swept by its holders.
				continue
			}
			if _, err := s.model.SweepTombstones(ctx, before, now); err != nil {
				r.logger.Warn("sweeping tombstones", zap.String("firm", id), zap.Error(err))
			}
		}
	}
}
