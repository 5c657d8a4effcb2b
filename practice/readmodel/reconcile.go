package readmodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// reconcile lists every record of k and compares the whole with the
// model: what changed raises its change record, what the vendor no longer
// has is removed with one change record of its removal. A record written
// since the pass started is not judged by it.
func (s *Syncer) reconcile(ctx context.Context, k practice.Kind) error {
	start := s.now()
	seen := map[string]bool{}
	if err := s.walk(ctx, k, practice.Query{Limit: pageLimit}, func(items []json.RawMessage, readAt time.Time) error {
		for _, raw := range items {
			var v struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &v) == nil {
				seen[v.ID] = true
			}
		}
		return s.keep(ctx, k, items, readAt, true)
	}); err != nil {
		return fmt.Errorf("reconcile %s %s: %w", s.sys.Label, k, err)
	}
	// What the model holds is judged as every instance wrote it: a
	// record another instance stored during the walk is in the feed, not
	// yet in this instance's memory, and would escape the comparison
	// until the next pass.
	if err := s.model.CatchUp(ctx); err != nil {
		return fmt.Errorf("reconcile %s %s: %w", s.sys.Label, k, err)
	}
	s.mu.Lock()
	// Listed, though their answers could not be used: they are there.
	for id := range s.kindProgress(k).Unusable {
		seen[id] = true
	}
	s.mu.Unlock()
	var unconfirmed int
	for _, id := range s.model.idsBefore(k, start) {
		if seen[id] {
			continue
		}
		confirmedAt := s.now()
		gone, err := s.confirmGone(ctx, k, id, confirmedAt)
		if errors.Is(err, errLeaseLost) || ctx.Err() != nil {
			return err
		}
		if err != nil {
			// Kept: a record is removed only on the vendor's word.
			unconfirmed++
			s.logger.Warn("removal not confirmed; the record stays", zap.String("sync", s.name()),
				zap.String("kind", string(k)), zap.String("id", id), zap.Error(err))
			continue
		}
		if !gone {
			continue
		}
		if err := s.forget(ctx, k, id, confirmedAt); err != nil {
			return err
		}
	}
	if unconfirmed > 0 {
		return fmt.Errorf("reconcile %s %s: %d removals could not be confirmed with the vendor", s.sys.Label, k, unconfirmed)
	}
	s.mu.Lock()
	kp := s.kindProgress(k)
	kp.About, kp.Seen = len(seen), len(seen)
	kp.Watermark, kp.ConfirmedAt, kp.ReconciledAt, kp.PolledAt = start, start, s.now(), s.now()
	kp.FullFrom = start
	s.mu.Unlock()
	s.logger.Info("reconciled", zap.String("sync", s.name()), zap.String("kind", string(k)), zap.Int("records", len(seen)))
	return nil
}

// confirmGone asks the vendor for a record a listing did not show: a
// listing paged by offset (Karbon's $skip) skips a record whenever one
// before it is deleted during the walk, so only the vendor's not found
// removes it. A record the vendor still has is kept as it now is.
func (s *Syncer) confirmGone(ctx context.Context, k practice.Kind, id string, readAt time.Time) (bool, error) {
	if err := s.renew(ctx); err != nil {
		return false, err
	}
	raw, err := s.sys.Reader.Get(ctx, s.tenant(), k, id)
	var unusable *practice.UnusableError
	switch {
	case errors.As(err, &unusable):
		// There, though its answer cannot be used: kept as last known.
		s.noteUnusable(k, []*practice.UnusableError{unusable})
		return false, nil
	case errors.Is(err, practice.ErrNotFound):
		return true, nil
	case err != nil:
		return false, err
	}
	return false, s.keep(ctx, k, []json.RawMessage{raw}, readAt, true)
}

// forget removes a record the vendor no longer has, raising one change
// record whose after is null.
//
// Its id is the record's removal, whatever state it had: two instances
// removing it raise one change.
func (s *Syncer) forget(ctx context.Context, k practice.Kind, id string, at time.Time) error {
	return s.forgetTo(ctx, s.sink, k, id, at)
}

// forgetTo is forget, publishing to sink.
func (s *Syncer) forgetTo(ctx context.Context, sink changes.ChangeSink, k practice.Kind, id string, at time.Time) error {
	return s.model.Remove(ctx, k, id, at, func(before json.RawMessage) error {
		if err := sink.Publish(ctx, changes.RemovalChange(s.tenant(), k, id, before, at)); err != nil {
			return fmt.Errorf("publish removal of %s: %w", id, err)
		}
		return nil
	})
}
