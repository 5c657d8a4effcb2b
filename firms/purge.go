package firms

import (
	"context"
	"fmt"
	"math"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// Purge removes a disconnected connection's copy, called by the instance
// that disconnects it: its syncs stop here, and its read model's records,
// tombstones and sync checkpoints are deleted from the store, with what
// its system remembers of the organisation (with no change record and no
// event), so that a later connection of the same role backfills afresh.
// Other instances drop their copy from memory when they see it
// disconnected. Purging again is no error.
func (r *Runtime) Purge(ctx context.Context, c connection.Connection) error {
	f, purger, err := r.purging(c)
	if err != nil {
		return err
	}
	// First the fence, past every attempt: an instance that has not seen
	// the disconnect and still syncs the connection writes nothing more,
	// then what it wrote before is purged.
	if err := r.raiseFence(ctx, disconnectedFence(c)); err != nil {
		return err
	}
	r.follow.mu.Lock()
	defer r.follow.mu.Unlock()
	// Never opened again here, whatever the store says until the
	// disconnect is written.
	r.follow.purged[c.ID] = true
	cur := f.table.Load()
	f.table.Store(f.decide(cur.without(c.ID, c.Role), cur.followed))
	if open := cur.opened(c.ID); open != nil {
		open.close()
		return r.purgeStore(ctx, open)
	}
	if f.serves(c.Role) {
		// The role's copy is the Caddyfile system's, which the
		// connection never served.
		return nil
	}
	// Not open here: what the role keeps.
	return r.purgeRole(ctx, purger, c, f.keptKinds(cur, c))
}

// keptKinds are the kinds connection c, not open here, kept: its role's,
// with the firm's engagements only when its system kept them (never a
// system that keeps no proposals: the engagements another keeps stay).
// Where this instance has not followed the connections, a records system
// that keeps proposals is taken to have kept them, as it does first.
func (f *firm) keptKinds(cur *table, c connection.Connection) []practice.Kind {
	from := firmsystem.EngagementsNone
	switch {
	case !firmsystem.KeepsProposals(c.Role, c.System):
	case cur.followed:
		if cur.engagements == c.Role {
			from = c.Role
		}
	case c.Role == firmsystem.EngagementsRecords:
		from = c.Role
	}
	return f.connKinds(c.Role, from)
}

// PurgeOrganisation drops what connection c holds of the organisation it
// reached (c.OrganisationID), called by the instance where its
// administrator chooses another: its system or held copy closes here and
// its copy's records, tombstones and checkpoints are deleted from the
// store, with what its system remembers of the organisation (no change
// record, no event), so that the next organisation backfills afresh and
// /v1 never lists records of both. Until the connection reaches the new
// organisation, this instance answers the role as reconnecting; the
// others, which stopped its sync when the reconnect began, serve their
// held copy until they see the new organisation and load the store's.
// Unlike Purge, the connection is opened again.
func (r *Runtime) PurgeOrganisation(ctx context.Context, c connection.Connection) error {
	f, purger, err := r.purging(c)
	if err != nil {
		return err
	}
	// First the fence: an instance that has not seen the reconnect and
	// still syncs the old organisation writes nothing more (its writes
	// carry an older attempt), then what it wrote before is purged.
	if err := r.raiseFence(ctx, connectionFence(c)); err != nil {
		return err
	}
	r.follow.mu.Lock()
	defer r.follow.mu.Unlock()
	cur := f.table.Load()
	kinds := f.keptKinds(cur, c)
	if open := cur.opened(c.ID); open != nil {
		next := cur.without(c.ID, c.Role)
		next.unserved[c.Role] = reconnecting(c.Role)
		f.table.Store(f.decide(next, cur.followed))
		open.close()
		kinds = open.kinds
	}
	if f.serves(c.Role) {
		// The role's copy is the Caddyfile system's, which the
		// connection never served.
		return nil
	}
	return r.purgeRole(ctx, purger, c, kinds)
}

// without is the connections and unserved roles of t less connection id
// in role, which is then disconnected.
func (t *table) without(id, role string) *table {
	next := newTable()
	next.engagements = t.engagements
	for r, c := range t.conns {
		if c.conn.ID != id {
			next.conns[r] = c
		}
	}
	for r, u := range t.unserved {
		next.unserved[r] = u
	}
	if next.conns[role] == nil {
		next.unserved[role] = notConnected(role)
	}
	return next
}

// connectionFence is the fence of c's writes: its attempt, which a new
// consent raises, within the connection.
func connectionFence(c connection.Connection) readmodel.Fence {
	return readmodel.Fence{Firm: c.Firm, Name: c.ID, Generation: int64(c.Attempt)}
}

// disconnectedFence is the fence of a disconnected connection: past
// every attempt, since a disconnected connection never writes again (a
// firm connects anew as another connection).
func disconnectedFence(c connection.Connection) readmodel.Fence {
	return readmodel.Fence{Firm: c.Firm, Name: c.ID, Generation: math.MaxInt64}
}

// raiseFence raises fence f in the read model's store, when its writes
// are fenced.
func (r *Runtime) raiseFence(ctx context.Context, f readmodel.Fence) error {
	fencer, ok := r.d.Store.(readmodel.Fencer)
	if !ok {
		return nil
	}
	if err := fencer.RaiseFence(ctx, f); err != nil {
		return fmt.Errorf("fencing the connection's writes: %w", err)
	}
	return nil
}

// purging is what a purge of c's copy works on: its firm and the read
// model's store.
func (r *Runtime) purging(c connection.Connection) (*firm, readmodel.Purger, error) {
	f := r.firm(c.Firm)
	if f == nil {
		return nil, nil, errNoFirm(c.Firm)
	}
	purger, ok := r.d.Store.(readmodel.Purger)
	if !ok {
		return nil, nil, fmt.Errorf("the read model's store cannot purge a copy")
	}
	return f, purger, nil
}

// purgeStore deletes what connection c, closed here, kept: see purgeRole.
func (r *Runtime) purgeStore(ctx context.Context, c *system) error {
	purger, ok := r.d.Store.(readmodel.Purger)
	if !ok {
		return fmt.Errorf("the read model's store cannot purge a copy")
	}
	return r.purgeRole(ctx, purger, *c.conn, c.kinds)
}

// purgeRole deletes what connection c kept of its organisation: the
// records and tombstones of its kinds and its sync's checkpoints, then
// what its system remembers beyond the copy in the upstream state
// (XPM's first-seen stamps: firmsystem.Remembers), so that the next
// organisation's records are seen afresh.
func (r *Runtime) purgeRole(ctx context.Context, purger readmodel.Purger, c connection.Connection, kinds []practice.Kind) error {
	if err := purger.Purge(ctx, c.Firm, kinds, readmodel.SyncCheckpoints(c.Firm, c.Role)); err != nil {
		return err
	}
	prefixes := firmsystem.Remembered(c.Role, c.System, c.Firm, kinds)
	if len(prefixes) == 0 {
		return nil
	}
	forget, ok := r.d.State.(stateForgetter)
	if !ok {
		return fmt.Errorf("the upstream state store cannot forget an organisation's state")
	}
	for _, prefix := range prefixes {
		if err := forget.Forget(ctx, prefix); err != nil {
			return fmt.Errorf("forgetting what %s kept of the organisation: %w", c.System, err)
		}
	}
	return nil
}

// stateForgetter is an upstream state store that forgets every state
// under a key prefix.
type stateForgetter interface {
	Forget(ctx context.Context, prefix string) error
}
