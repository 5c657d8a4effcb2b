package readmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// poll reads k's records changed since the last poll, with the vendor's
// modified-since filter where it has one, else every record: a vendor
// that keeps no modification time (Karbon's work items and users) is
// listed whole, and what differs from the copy is a change.
func (s *Syncer) poll(ctx context.Context, k practice.Kind, kp kindProgress) error {
	start := s.now()
	q := practice.Query{Limit: pageLimit}
	if s.incremental(k) {
		q.Filter.UpdatedSince = kp.Watermark.Add(-pollOverlap)
	}
	if err := s.walk(ctx, k, q, func(items []json.RawMessage, readAt time.Time) error {
		return s.keep(ctx, k, items, readAt, true)
	}); err != nil {
		return fmt.Errorf("poll %s %s: %w", s.sys.Label, k, err)
	}
	s.mu.Lock()
	// The walk noted what it could not use, and kept what it could.
	kp.Unusable = s.kindProgress(k).Unusable
	s.mu.Unlock()
	kp.Watermark, kp.ConfirmedAt, kp.PolledAt = start, start, s.now()
	s.setKind(k, kp)
	return s.retryUnusable(ctx, k)
}

// walk pages through a query of the vendor, renewing the lease between
// pages; it stops at a cursor that does not move.
func (s *Syncer) walk(ctx context.Context, k practice.Kind, q practice.Query, fn func(items []json.RawMessage, readAt time.Time) error) error {
	for {
		readAt := s.now()
		page, err := s.sys.Reader.List(ctx, s.tenant(), k, q)
		if err != nil {
			return err
		}
		if err := fn(page.Items, readAt); err != nil {
			return err
		}
		s.noteUnusable(k, page.Unusable)
		if !page.HasMore {
			return nil
		}
		if page.Next == "" || page.Next == q.Cursor {
			return fmt.Errorf("the adapter's next cursor does not move: %w", practice.ErrBadUpstream)
		}
		q.Cursor = page.Next
		if err := s.renew(ctx); err != nil {
			return err
		}
	}
}
