package readmodel

import (
	"context"
	"errors"
	"time"
)

// whileHeld runs a step while renewing the lease every third of its time to
// live, so that a step longer than the lease (a page of clients read one
// by one within Karbon's budget) is not taken over half way; losing the
// lease ends the step with errLeaseLost.
func (s *Syncer) whileHeld(ctx context.Context, step func(context.Context) (bool, error)) (bool, error) {
	stepCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(s.config.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stepCtx.Done():
				return
			case <-t.C:
				if err := s.renew(stepCtx); err != nil && stepCtx.Err() == nil {
					cancel(err)
					return
				}
			}
		}
	}()
	more, err := step(stepCtx)
	cancel(nil)
	<-renewed
	if cause := context.Cause(stepCtx); err != nil && cause != nil && cause != context.Canceled && ctx.Err() == nil {
		return false, cause
	}
	return more, err
}

// errLeaseLost ends a long step when another instance took the sync over.
var errLeaseLost = errors.New("sync lease lost to another instance")

func (s *Syncer) renew(ctx context.Context) error {
	held, err := s.leases.Lease(ctx, s.name(), s.holder, s.config.LeaseTTL)
	if err != nil {
		return err
	}
	if !held {
		s.mu.Lock()
		s.holding = false
		s.mu.Unlock()
		return errLeaseLost
	}
	return nil
}
