package karbon

import (
	"context"
	"fmt"
	"time"

	"github.com/practicegw/practicegw/adapters/paging"
	"github.com/practicegw/practicegw/internal/practice"
)

// Prime remembers the current state of every record of kinds (jobs when
// none are named) without publishing anything, so that the first webhook
// about a record after the gateway starts watching this firm knows what it
// was before: a work item moved the day the firm connects raises
// job.stage_changed, not nothing. The wiring runs it once when a firm's
// ingest route starts, in a goroutine it owns; it reads every work item
// (a page per 100) and, for clients and people, each record in full, all
// within the Karbon budget. A next link that repeats ends it with an error
// (practice.ErrBadUpstream), as does ctx ending.
func (a *Adapter) Prime(ctx context.Context, kinds ...practice.Kind) error {
	if len(kinds) == 0 {
		kinds = []practice.Kind{practice.Jobs}
	}
	for _, k := range kinds {
		if err := a.prime(ctx, k); err != nil {
			return fmt.Errorf("karbon: prime %s: %w", k, err)
		}
	}
	return nil
}

func (a *Adapter) prime(ctx context.Context, k practice.Kind) error {
	switch k {
	case practice.Jobs:
		return paging.All(ctx, func(ctx context.Context, token string) (paging.VendorPage[workItem], error) {
			return a.fetchWork(ctx, "", token, a.cfg.PageSize)
		}, func(ctx context.Context, w workItem) error {
			raw, err := a.jobJSON(w)
			if err != nil {
				return err
			}
			return a.rec.Baseline(ctx, a.tenant(), practice.Jobs, "job_"+w.WorkItemKey, raw)
		})
	case practice.Clients:
		return paging.All(ctx, func(ctx context.Context, token string) (paging.VendorPage[clientRow], error) {
			return a.fetchClients(ctx, time.Time{}, token)
		}, func(ctx context.Context, r clientRow) error {
			c, ok, err := a.readClient(ctx, r.ref)
			if err != nil || !ok {
				return err
			}
			return a.rec.Baseline(ctx, a.tenant(), practice.Clients, r.ref.id(), c.raw)
		})
	case practice.People:
		return paging.All(ctx, func(ctx context.Context, token string) (paging.VendorPage[userSummary], error) {
			return a.fetchUsers(ctx, "", token)
		}, func(ctx context.Context, u userSummary) error {
			raw, err := a.getPerson(ctx, u.Id)
			if err != nil {
				return err
			}
			return a.rec.Baseline(ctx, a.tenant(), practice.People, userID(u.Id), raw)
		})
	}
	return nil
}
