package readmodel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/recordindex"
)

// backfillPage reads the next page of k's first full pass and keeps it.
// A record read for the first time raises nothing: it was there before
// the gateway looked.
func (s *Syncer) backfillPage(ctx context.Context, k practice.Kind, kp kindProgress) error {
	start := s.now()
	if kp.Cursor == "" && kp.Seen == 0 {
		kp.Watermark = start
		if s.vendorFeed != nil && k == s.sys.Kinds[0] {
			// The feed starts before the listing, so that a change made
			// while listing is read from it afterwards.
			page, err := s.vendorFeed.Changes(ctx, s.tenant(), "")
			if err != nil {
				return fmt.Errorf("start %s change feed: %w", s.sys.Label, err)
			}
			s.mu.Lock()
			s.progress.FeedCursor = page.Next
			s.mu.Unlock()
		}
	}
	readAt := s.now()
	// A first read does not wait for another system of the firm to
	// answer its records' links (a ledger's customers, asked of the
	// records system, whose allowance its own backfill may be spending):
	// what it leaves for later, the reconciliation that follows the
	// backfill links.
	lctx, later := practice.LinksLater(ctx)
	page, err := s.sys.Reader.List(lctx, s.tenant(), k, practice.Query{Cursor: kp.Cursor, Limit: pageLimit})
	var inv *practice.InvalidError
	if errors.As(err, &inv) && kp.Cursor != "" {
		// The adapter no longer continues from the saved cursor (a newer
		// version): start this kind's backfill again.
		s.logger.Warn("backfill cursor refused; starting the kind again", zap.String("sync", s.name()),
			zap.String("kind", string(k)), zap.Error(err))
		kp.Cursor, kp.Seen = "", 0
		s.setKind(k, kp)
		return nil
	}
	if err != nil {
		return fmt.Errorf("backfill %s %s: %w", s.sys.Label, k, err)
	}
	if err := s.keep(ctx, k, page.Items, readAt, false); err != nil {
		return err
	}
	s.noteUnusable(k, page.Unusable)
	s.mu.Lock()
	kp.Unusable = s.kindProgress(k).Unusable
	s.mu.Unlock()
	kp.Seen += len(page.Items) + len(page.Unusable)
	kp.Relink = kp.Relink || later.Left() > 0
	if page.Total > 0 {
		kp.About = page.Total
	}
	if page.HasMore {
		if page.Next == "" || page.Next == kp.Cursor {
			return fmt.Errorf("backfill %s %s: the adapter's next cursor does not move: %w", s.sys.Label, k, practice.ErrBadUpstream)
		}
		kp.Cursor = page.Next
		s.setKind(k, kp)
		return nil
	}
	// The first poll comes at once: it confirms what changed while the
	// backfill read, which may have taken hours. A kind polled by
	// listing it whole waits its interval, as after any poll: at once it
	// would read every page the backfill has just read.
	kp.Backfilled, kp.Cursor, kp.About = true, "", kp.Seen
	kp.ConfirmedAt, kp.PolledAt, kp.ReconciledAt = kp.Watermark, time.Time{}, s.now()
	kp.FullFrom = kp.Watermark
	if !s.incremental(k) && s.vendorFeed == nil {
		kp.PolledAt = kp.ReconciledAt
	}
	relink := kp.Relink
	if relink {
		// Links were left for later: the kind is reconciled next,
		// waiting its turn for them.
		kp.ReconciledAt, kp.Relink = time.Time{}, false
	}
	s.setKind(k, kp)
	s.logger.Info("backfill ended", zap.String("sync", s.name()), zap.String("kind", string(k)), zap.Int("records", kp.Seen),
		zap.Bool("links_left_for_later", relink))
	return nil
}

func (s *Syncer) setKind(k practice.Kind, kp kindProgress) {
	s.mu.Lock()
	*s.kindProgress(k) = kp
	s.mu.Unlock()
}

// keep compares records just read with the model. New and unchanged
// records of a backfill are written in one batch with no change record;
// every other difference goes through the Recorder, which raises exactly
// one change record for it and saves it in the model.
//
// readAt is when the read began: a record removed since is not brought
// back by it.
func (s *Syncer) keep(ctx context.Context, k practice.Kind, items []json.RawMessage, readAt time.Time, announceNew bool) error {
	return s.keepTo(ctx, s.sink, 1, k, items, readAt, announceNew)
}

// keepTo is keep, publishing to sink, comparing width records at once
// (their change records and states then share the stores' commits).
func (s *Syncer) keepTo(ctx context.Context, sink changes.ChangeSink, width int, k practice.Kind, items []json.RawMessage, readAt time.Time, announceNew bool) error {
	var batch []Update
	var observe []changes.Observation
	for _, raw := range items {
		e, err := recordindex.NewEntry(raw)
		if err != nil {
			return fmt.Errorf("%s %s: %w: %w", s.sys.Label, k, practice.ErrBadUpstream, err)
		}
		before := s.model.find(s.model.kinds[k], e.ID)
		switch {
		case before != nil && bytes.Equal(before, raw):
			continue
		case before == nil && !announceNew && !s.model.removed(k, e.ID):
			batch = append(batch, Update{Kind: k, ID: e.ID, Raw: bytes.Clone(raw)})
			continue
		}
		o := changes.Observation{
			Tenant: s.tenant(), Kind: k, ResourceID: e.ID, After: bytes.Clone(raw),
			Created: before == nil, Version: version(raw), OccurredAt: time.Unix(0, e.Updated), ReadAt: readAt,
		}
		if e.Updated <= 0 {
			o.OccurredAt = time.Time{}
		}
		observe = append(observe, o)
	}
	if err := each(ctx, width, len(observe), func(i int) error {
		_, err := s.recorder.Observe(ctx, sink, observe[i])
		return err
	}); err != nil {
		return err
	}
	if len(batch) > 0 {
		if err := s.model.Apply(ctx, batch); err != nil {
			return err
		}
	}
	s.usable(k, items)
	return nil
}

// each runs fn for 0..n-1, width at a time (in order, one by one, when
// width is 1), and answers the first error.
func each(ctx context.Context, width, n int, fn func(i int) error) error {
	if width <= 1 || n <= 1 {
		for i := range n {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, n)
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := range n {
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// version is what identifies a record's state for its change id: its
// version, else its updated time.
func version(raw json.RawMessage) string {
	var v struct {
		Version   json.Number `json:"version"`
		UpdatedAt string      `json:"updated_at"`
	}
	_ = json.Unmarshal(raw, &v)
	if v.Version != "" {
		return v.Version.String()
	}
	return v.UpdatedAt
}
