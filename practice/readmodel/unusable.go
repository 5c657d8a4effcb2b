package readmodel

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/recordindex"
)

// A record whose vendor answer cannot be used (practice.UnusableError: a
// paid invoice whose payment answers 404, a row that cannot be read)
// stalls nothing else: the listing goes on without it, the copy keeps its
// last known state (or none), the reconciliation counts it as there, the
// sync's status names it, and each poll of its kind asks for it again, a
// few at a time, rather than every read.
const (
	// maxUnusable bounds the records a kind remembers as unusable: more
	// than that is the vendor failing the kind, not a record.
	maxUnusable = 100
	// unusableRetries bounds the unusable records one poll asks for
	// again.
	unusableRetries = 10
)

// noteUnusable remembers records a listing or read could not use, with
// why, and logs each the first time.
func (s *Syncer) noteUnusable(k practice.Kind, bad []*practice.UnusableError) {
	if len(bad) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kp := s.kindProgress(k)
	if kp.Unusable == nil {
		kp.Unusable = map[string]string{}
	}
	for _, u := range bad {
		if _, known := kp.Unusable[u.ID]; !known {
			if len(kp.Unusable) >= maxUnusable {
				continue
			}
			s.logger.Warn("a record's vendor answer cannot be used; the sync goes on without it and asks again",
				zap.String("sync", s.name()), zap.String("kind", string(k)), zap.String("id", u.ID), zap.Error(u))
		}
		kp.Unusable[u.ID] = u.Reason()
	}
}

// usable forgets, of the records just kept, those remembered as unusable.
func (s *Syncer) usable(k practice.Kind, items []json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kp := s.kindProgress(k)
	if len(kp.Unusable) == 0 {
		return
	}
	for _, raw := range items {
		if e, err := recordindex.NewEntry(raw); err == nil {
			if _, ok := kp.Unusable[e.ID]; ok {
				delete(kp.Unusable, e.ID)
				s.logger.Info("a record's vendor answer is usable again", zap.String("sync", s.name()),
					zap.String("kind", string(k)), zap.String("id", e.ID))
			}
		}
	}
}

// retryUnusable asks the vendor again for a few of k's unusable records:
// one now usable is kept (raising its change), one the vendor no longer
// has is forgotten here (the reconciliation removes it, on the vendor's
// word), one still unusable waits for the next poll. The vendor failing
// otherwise ends the round without failing the poll.
func (s *Syncer) retryUnusable(ctx context.Context, k practice.Kind) error {
	s.mu.Lock()
	var ids []string
	for id := range s.kindProgress(k).Unusable {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	for _, id := range ids[:min(len(ids), unusableRetries)] {
		if err := s.renew(ctx); err != nil {
			return err
		}
		readAt := s.now()
		raw, err := s.sys.Reader.Get(ctx, s.tenant(), k, id)
		var unusable *practice.UnusableError
		switch {
		case err == nil:
			if err := s.keep(ctx, k, []json.RawMessage{raw}, readAt, true); err != nil {
				return err
			}
		case errors.As(err, &unusable):
			s.noteUnusable(k, []*practice.UnusableError{unusable})
		case errors.Is(err, practice.ErrNotFound):
			s.forgetUnusable(k, id)
		default:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.logger.Warn("an unusable record could not be asked for again", zap.String("sync", s.name()),
				zap.String("kind", string(k)), zap.String("id", id), zap.Error(err))
			return nil
		}
	}
	return nil
}

func (s *Syncer) forgetUnusable(k practice.Kind, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.kindProgress(k).Unusable, id)
}

// Unusable is a record the sync could not use the vendor's answer for.
type Unusable struct {
	Kind   practice.Kind
	ID     string
	Reason string
}

// unusableLocked are the sync's unusable records, by kind and id; mu is
// held.
func (s *Syncer) unusableLocked() []Unusable {
	var out []Unusable
	for _, k := range s.sys.Kinds {
		kp := s.kindProgress(k)
		ids := make([]string, 0, len(kp.Unusable))
		for id := range kp.Unusable {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			out = append(out, Unusable{Kind: k, ID: id, Reason: kp.Unusable[id]})
		}
	}
	return out
}
