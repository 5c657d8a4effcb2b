package gateway

import (
	"context"
	"fmt"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// Purge removes a disconnected connection's copy, called by the instance
// that disconnects it: its syncs stop here, and its read model's records,
// tombstones and sync checkpoints are deleted from the store (with no
// change record and no event), so that a later connection of the same
// role backfills afresh. Other instances drop their copy from memory when
// they see it disconnected. Purging again is no error.
func (a *App) Purge(ctx context.Context, c connection.Connection) error {
	b, purger, err := a.purging(c)
	if err != nil {
		return err
	}
	a.follow.mu.Lock()
	defer a.follow.mu.Unlock()
	// Never opened again here, whatever the store says until the
	// disconnect is written.
	a.follow.purged[c.ID] = true
	cur := b.conns.Load()
	b.conns.Store(cur.without(c.ID, c.Role))
	if open := cur.opened(c.ID); open != nil {
		a.closeConnection(open)
		return a.purgeStore(ctx, c.Firm, open.syncs)
	}
	if b.model != nil && b.model.Owns(firmsystem.Kinds(c.Role)[0]) {
		// The role's copy is the Caddyfile system's, which the
		// connection never served.
		return nil
	}
	// Not open here: what the role keeps.
	return purger.Purge(ctx, c.Firm, firmsystem.Kinds(c.Role), readmodel.SyncCheckpoints(c.Firm, c.Role))
}

// PurgeOrganisation drops what connection c holds of the organisation it
// reached (c.TenantID), called by the instance where its administrator
// chooses another: its system or held copy closes here and its copy's
// records, tombstones and checkpoints are deleted from the store (no
// change record, no event), so that the next organisation backfills
// afresh and /v1 never lists records of both. Until the connection
// reaches the new organisation, this instance answers the role as
// reconnecting; the others, which stopped its sync when the reconnect
// began, serve their held copy until they see the new organisation and
// load the store's. Unlike Purge, the connection is opened again.
func (a *App) PurgeOrganisation(ctx context.Context, c connection.Connection) error {
	b, purger, err := a.purging(c)
	if err != nil {
		return err
	}
	a.follow.mu.Lock()
	defer a.follow.mu.Unlock()
	cur := b.conns.Load()
	if open := cur.opened(c.ID); open != nil {
		next := cur.without(c.ID, c.Role)
		next.unserved[c.Role] = reconnecting(c.Role)
		b.conns.Store(next)
		a.closeConnection(open)
	}
	if b.model != nil && b.model.Owns(firmsystem.Kinds(c.Role)[0]) {
		// The role's copy is the Caddyfile system's, which the
		// connection never served.
		return nil
	}
	return purger.Purge(ctx, c.Firm, firmsystem.Kinds(c.Role), readmodel.SyncCheckpoints(c.Firm, c.Role))
}

// purging is what a purge of c's copy works on: its firm's backends and
// the read model's store.
func (a *App) purging(c connection.Connection) (*firmBackends, readmodel.Purger, error) {
	b, ok := a.firms[c.Firm]
	if !ok {
		return nil, nil, fmt.Errorf("no firm %q: %w", c.Firm, practice.ErrNotFound)
	}
	purger, ok := a.readStore.(readmodel.Purger)
	if !ok {
		return nil, nil, fmt.Errorf("the read model's store cannot purge a copy")
	}
	return b, purger, nil
}

// opened is connection id when it is open in s.
func (s *connSet) opened(id string) *connSystem {
	if s == nil {
		return nil
	}
	for _, c := range s.byRole {
		if c.opened.ID == id {
			return c
		}
	}
	return nil
}

// without is s less connection id in role, which is then disconnected.
func (s *connSet) without(id, role string) *connSet {
	next := newConnSet()
	if s != nil {
		for r, c := range s.byRole {
			if c.opened.ID != id {
				next.byRole[r] = c
			}
		}
		for r, u := range s.unserved {
			next.unserved[r] = u
		}
	}
	if next.byRole[role] == nil {
		next.unserved[role] = notConnected(role)
	}
	return next
}

// purgeStore deletes the copy syncs kept of a firm's system: the records
// and tombstones of their kinds, and their checkpoints.
func (a *App) purgeStore(ctx context.Context, firm string, syncs []*readmodel.Syncer) error {
	purger, ok := a.readStore.(readmodel.Purger)
	if !ok {
		return fmt.Errorf("the read model's store cannot purge a copy")
	}
	var kinds []practice.Kind
	var checkpoints []string
	for _, s := range syncs {
		kinds = append(kinds, firmsystem.Kinds(s.Role())...)
		checkpoints = append(checkpoints, readmodel.SyncCheckpoints(firm, s.Role())...)
	}
	return purger.Purge(ctx, firm, kinds, checkpoints)
}
