package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/practicegw/practicegw/internal/practice"
)

// defaultLimit applies when a query sets no limit; the API always sets one.
const defaultLimit = 50

// List returns one page of a collection in ascending id order. Paging is by
// keyset: the cursor is the last id of the previous page, so a record added
// or edited while a caller pages is never skipped or repeated. The items
// share memory with the adapter and must not be modified.
func (r *Records) List(_ context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	ts, err := r.lookup(t)
	if err != nil {
		return practice.Page{}, err
	}
	ki, ok := kindIndex(k)
	if !ok {
		return practice.Page{}, fmt.Errorf("demo: unknown kind %q", k)
	}
	if q.Cursor != "" && !validID(k.IDPrefix(), q.Cursor) {
		return practice.Page{}, &practice.InvalidError{Code: "invalid_cursor", Param: "cursor",
			Message: "The cursor is not one this collection issued; pass the next_cursor of the previous page."}
	}
	limit := q.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	m := newMatcher(q.Filter)

	ts.mu.RLock()
	defer ts.mu.RUnlock()
	col := ts.cols[ki]
	start := 0
	if q.Cursor != "" {
		start = search(col, q.Cursor)
		if start < len(col) && col[start].id == q.Cursor {
			start++
		}
	}

	if !m.active {
		end := min(start+limit, len(col))
		page := practice.Page{Items: make([]json.RawMessage, end-start)}
		for i := range page.Items {
			page.Items[i] = col[start+i].raw
		}
		if end < len(col) {
			page.HasMore, page.Next = true, col[end-1].id
		}
		return page, nil
	}

	page := practice.Page{Items: make([]json.RawMessage, 0, min(limit, len(col)-start))}
	last := ""
	for i := start; i < len(col); i++ {
		e := &col[i]
		if !m.match(e) {
			continue
		}
		if len(page.Items) == limit {
			page.HasMore, page.Next = true, last
			break
		}
		page.Items = append(page.Items, e.raw)
		last = e.id
	}
	return page, nil
}

// Get returns one record. An id of another firm, of the sandbox when t is
// live (or the reverse), or of another kind is not found.
func (r *Records) Get(_ context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	ts, err := r.lookup(t)
	if err != nil {
		return nil, err
	}
	if _, ok := kindIndex(k); !ok {
		return nil, fmt.Errorf("demo: unknown kind %q", k)
	}
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	if e := ts.find(k, id); e != nil {
		return e.raw, nil
	}
	return nil, notFound(k, id)
}

// matcher is a Filter compiled for comparing entries. Every range is
// inclusive at both ends, like updated_since.
type matcher struct {
	f                             practice.Filter
	updatedSince                  int64
	activityAfter, activityBefore int64
	active                        bool
}

func newMatcher(f practice.Filter) matcher {
	m := matcher{f: f, updatedSince: math.MinInt64, activityAfter: math.MinInt64, activityBefore: math.MaxInt64}
	if !f.UpdatedSince.IsZero() {
		m.updatedSince = nanos(f.UpdatedSince)
	}
	if !f.LastActivityAfter.IsZero() {
		m.activityAfter = nanos(f.LastActivityAfter)
	}
	if !f.LastActivityBefore.IsZero() {
		m.activityBefore = nanos(f.LastActivityBefore)
	}
	m.active = !f.UpdatedSince.IsZero() || !f.LastActivityAfter.IsZero() || !f.LastActivityBefore.IsZero() ||
		f.Owner != "" || f.Status != "" || f.Stage != "" || f.Client != "" || f.DeadlineAfter != "" || f.DeadlineBefore != ""
	return m
}

func (m *matcher) match(e *entry) bool {
	f := &m.f
	return e.updated >= m.updatedSince &&
		e.activity >= m.activityAfter && e.activity <= m.activityBefore &&
		(f.Owner == "" || e.owner == f.Owner) &&
		(f.Status == "" || e.status == f.Status) &&
		(f.Stage == "" || e.stage == f.Stage) &&
		(f.Client == "" || e.client == f.Client) &&
		// Deadlines are YYYY-MM-DD, so they compare as strings; a job
		// without one matches no deadline range.
		(f.DeadlineAfter == "" || e.deadline != "" && e.deadline >= f.DeadlineAfter) &&
		(f.DeadlineBefore == "" || e.deadline != "" && e.deadline <= f.DeadlineBefore)
}

var (
	minNanos = time.Unix(0, math.MinInt64)
	maxNanos = time.Unix(0, math.MaxInt64)
)

// nanos is t in Unix nanoseconds, clamped to what int64 holds; the zero
// time is the smallest.
func nanos(t time.Time) int64 {
	switch {
	case t.Before(minNanos):
		return math.MinInt64
	case t.After(maxNanos):
		return math.MaxInt64
	}
	return t.UnixNano()
}
