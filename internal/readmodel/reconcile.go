package readmodel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/changes"
	"github.com/practicegw/practicegw/internal/practice"
)

// reconcile lists every record of k and compares the whole with the
// model: what changed raises its change record, what the vendor no longer
// has is removed with one change record of its removal. A record written
// since the pass started is not judged by it.
func (s *Syncer) reconcile(ctx context.Context, k practice.Kind) error {
	start := s.now()
	seen := map[string]bool{}
	if err := s.walk(ctx, k, practice.Query{Limit: pageLimit}, func(items []json.RawMessage) error {
		for _, raw := range items {
			var v struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(raw, &v) == nil {
				seen[v.ID] = true
			}
		}
		return s.keep(ctx, k, items, true)
	}); err != nil {
		return fmt.Errorf("reconcile %s %s: %w", s.Label, k, err)
	}
	for _, id := range s.Model.idsBefore(k, start) {
		if seen[id] {
			continue
		}
		if err := s.forget(ctx, k, id, start); err != nil {
			return err
		}
	}
	s.mu.Lock()
	kp := s.kindProgress(k)
	kp.About, kp.Seen = len(seen), len(seen)
	kp.Watermark, kp.ConfirmedAt, kp.ReconciledAt, kp.PolledAt = start, start, s.now(), s.now()
	s.mu.Unlock()
	s.Logger.Info("reconciled", zap.String("sync", s.name()), zap.String("kind", string(k)), zap.Int("records", len(seen)))
	return nil
}

// forget removes a record the vendor no longer has, raising one change
// record whose after is null.
func (s *Syncer) forget(ctx context.Context, k practice.Kind, id string, at time.Time) error {
	before := s.Model.find(s.Model.kinds[k], id)
	if before == nil {
		return nil
	}
	c := practice.Change{
		ID:   changes.ChangeID(s.tenant(), k, id, "removed", before),
		Firm: s.tenant().Firm, Kind: k, ResourceID: id,
		Before: bytes.Clone(before), After: json.RawMessage("null"), OccurredAt: at,
	}
	if err := s.Sink.Publish(ctx, c); err != nil {
		return fmt.Errorf("publish removal of %s: %w", id, err)
	}
	return s.Model.Apply(ctx, []Update{{Kind: k, ID: id}})
}
