package readmodel

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// readFeed reads the vendor's change feed from where it stopped, one
// reader at a time: the polls' and the reads a notification asks for.
func (s *Syncer) readFeed(ctx context.Context) error { return s.readFeedTo(ctx, s.sink, 1) }

// readFeedTo is readFeed, publishing to sink, comparing width records at
// once.
func (s *Syncer) readFeedTo(ctx context.Context, sink changes.ChangeSink, width int) error {
	s.feedMu.Lock()
	defer s.feedMu.Unlock()
	start := s.now()
	s.mu.Lock()
	cursor := s.progress.FeedCursor
	s.mu.Unlock()
	k := s.sys.Kinds[0]
	for i := 0; ; i++ {
		if i == maxFeedPages {
			break
		}
		readAt := s.now()
		page, err := s.vendorFeed.Changes(ctx, s.tenant(), cursor)
		if errors.Is(err, practice.ErrFeedExpired) {
			s.logger.Warn("change feed expired; reconciling", zap.String("sync", s.name()), zap.Error(err))
			s.mu.Lock()
			s.progress.FeedCursor, s.progress.ReconcileFrom = "", start
			s.mu.Unlock()
			fresh, err := s.vendorFeed.Changes(ctx, s.tenant(), "")
			if err != nil {
				return fmt.Errorf("restart %s change feed: %w", s.sys.Label, err)
			}
			cursor = fresh.Next
			break
		}
		if err != nil {
			return fmt.Errorf("%s change feed: %w", s.sys.Label, err)
		}
		if err := s.keepTo(ctx, sink, width, k, page.Changed, readAt, true); err != nil {
			return err
		}
		if err := each(ctx, width, len(page.Gone), func(i int) error { return s.forgetTo(ctx, sink, k, page.Gone[i], start) }); err != nil {
			return err
		}
		for _, o := range page.Others {
			if o.Kind == k || !slices.Contains(s.sys.Kinds, o.Kind) {
				continue // a kind another system keeps for the firm
			}
			// A record first seen while its kind's backfill still reads
			// was there before the gateway looked, as the backfill says.
			s.mu.Lock()
			announce := s.kindProgress(o.Kind).Backfilled
			s.mu.Unlock()
			if err := s.keepTo(ctx, sink, width, o.Kind, o.Changed, readAt, announce); err != nil {
				return err
			}
			for _, id := range o.Gone {
				if err := s.forgetTo(ctx, sink, o.Kind, id, start); err != nil {
					return err
				}
			}
		}
		if page.Next == "" || page.More && page.Next == cursor {
			return fmt.Errorf("%s change feed does not move: %w", s.sys.Label, practice.ErrBadUpstream)
		}
		cursor = page.Next
		if !page.More {
			break
		}
		if err := s.renew(ctx); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.progress.FeedCursor = cursor
	for _, k := range s.sys.Kinds {
		// A kind whose backfill still reads is confirmed from the
		// backfill's start when it ends, not from here.
		if kp := s.kindProgress(k); kp.Backfilled {
			kp.Watermark, kp.ConfirmedAt, kp.PolledAt = start, start, s.now()
		}
	}
	s.mu.Unlock()
	return nil
}
