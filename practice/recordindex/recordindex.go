// Package recordindex keeps a collection of /v1 records in memory, sorted
// by id and already encoded, with the fields the contract's filters
// compare, so that a page is served without touching JSON. The demo
// records and the read model of a firm's real systems both serve /v1 from
// it, so paging and filters mean the same thing over either.
package recordindex

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Entry is one record: its wire bytes and the fields filters compare.
type Entry struct {
	ID       string
	Raw      json.RawMessage
	Updated  int64 // updated_at, Unix nanoseconds
	Activity int64 // clients' last_activity_at, Unix nanoseconds
	Owner    string
	Status   string
	Stage    string
	Client   string
	Deadline string
}

// fields are the members of any kind that an entry keeps.
type fields struct {
	ID             string    `json:"id"`
	UpdatedAt      time.Time `json:"updated_at"`
	LastActivityAt time.Time `json:"last_activity_at"`
	Owner          string    `json:"owner"`
	Status         string    `json:"status"`
	Stage          string    `json:"stage"`
	Client         string    `json:"client"`
	Deadline       string    `json:"deadline"`
}

// NewEntry indexes a record's /v1 JSON; raw is kept, not copied.
func NewEntry(raw json.RawMessage) (Entry, error) {
	var f fields
	if err := json.Unmarshal(raw, &f); err != nil {
		return Entry{}, fmt.Errorf("index record: %w", err)
	}
	if f.ID == "" {
		return Entry{}, fmt.Errorf("index record: no id")
	}
	return Entry{
		ID: f.ID, Raw: raw, Updated: Nanos(f.UpdatedAt), Activity: Nanos(f.LastActivityAt),
		Owner: f.Owner, Status: f.Status, Stage: f.Stage, Client: f.Client, Deadline: f.Deadline,
	}, nil
}

// Collection is a kind's entries sorted by id. It is a value the caller
// guards: reads and writes of one Collection need the caller's lock.
type Collection []Entry

// Sorted makes a Collection of entries in any order; of two entries with
// one id the later wins.
func Sorted(entries []Entry) Collection {
	slices.SortStableFunc(entries, func(a, b Entry) int { return strings.Compare(a.ID, b.ID) })
	out := entries[:0]
	for _, e := range entries {
		if n := len(out); n > 0 && out[n-1].ID == e.ID {
			out[n-1] = e
			continue
		}
		out = append(out, e)
	}
	return Collection(out)
}

// Search returns the index of the first entry whose id is >= id.
func (c Collection) Search(id string) int {
	i, _ := slices.BinarySearchFunc(c, id, func(e Entry, id string) int { return strings.Compare(e.ID, id) })
	return i
}

// Find returns the entry with id, or nil; the pointer is valid until the
// collection next changes.
func (c Collection) Find(id string) *Entry {
	if i := c.Search(id); i < len(c) && c[i].ID == id {
		return &c[i]
	}
	return nil
}

// Upsert puts e in its place, replacing an entry with its id.
func (c *Collection) Upsert(e Entry) {
	col := *c
	i := col.Search(e.ID)
	if i < len(col) && col[i].ID == e.ID {
		col[i] = e
		return
	}
	*c = slices.Insert(col, i, e)
}

// Remove deletes the entry with id and reports whether there was one.
func (c *Collection) Remove(id string) bool {
	col := *c
	i := col.Search(id)
	if i == len(col) || col[i].ID != id {
		return false
	}
	*c = slices.Delete(col, i, i+1)
	return true
}

// Page returns the page of q: up to limit entries after the cursor (the
// last id of the previous page) that match the filter, in id order. Keyset
// paging means a record added or edited while a caller pages is never
// skipped or repeated. The items share memory with the collection.
func (c Collection) Page(q practice.Query, limit int) practice.Page {
	m := newMatcher(q.Filter)
	start := 0
	if q.Cursor != "" {
		start = c.Search(q.Cursor)
		if start < len(c) && c[start].ID == q.Cursor {
			start++
		}
	}
	if !m.active {
		end := min(start+limit, len(c))
		page := practice.Page{Items: make([]json.RawMessage, max(end-start, 0))}
		for i := range page.Items {
			page.Items[i] = c[start+i].Raw
		}
		if end < len(c) {
			page.HasMore, page.Next = true, c[end-1].ID
		}
		return page
	}
	page := practice.Page{Items: make([]json.RawMessage, 0, min(limit, max(len(c)-start, 0)))}
	last := ""
	for i := start; i < len(c); i++ {
		e := &c[i]
		if !m.Match(e) {
			continue
		}
		if len(page.Items) == limit {
			page.HasMore, page.Next = true, last
			break
		}
		page.Items = append(page.Items, e.Raw)
		last = e.ID
	}
	return page
}

// Matcher is a Filter compiled for comparing entries. Every range is
// inclusive at both ends, like updated_since.
type Matcher struct {
	f                             practice.Filter
	updatedSince                  int64
	activityAfter, activityBefore int64
	active                        bool
}

// newMatcher compiles f.
func newMatcher(f practice.Filter) Matcher {
	m := Matcher{f: f, updatedSince: math.MinInt64, activityAfter: math.MinInt64, activityBefore: math.MaxInt64}
	if !f.UpdatedSince.IsZero() {
		m.updatedSince = Nanos(f.UpdatedSince)
	}
	if !f.LastActivityAfter.IsZero() {
		m.activityAfter = Nanos(f.LastActivityAfter)
	}
	if !f.LastActivityBefore.IsZero() {
		m.activityBefore = Nanos(f.LastActivityBefore)
	}
	m.active = !f.UpdatedSince.IsZero() || !f.LastActivityAfter.IsZero() || !f.LastActivityBefore.IsZero() ||
		f.Owner != "" || f.Status != "" || f.Stage != "" || f.Client != "" || f.DeadlineAfter != "" || f.DeadlineBefore != ""
	return m
}

// Match reports whether e passes every filter.
func (m *Matcher) Match(e *Entry) bool {
	f := &m.f
	return e.Updated >= m.updatedSince &&
		e.Activity >= m.activityAfter && e.Activity <= m.activityBefore &&
		(f.Owner == "" || e.Owner == f.Owner) &&
		(f.Status == "" || e.Status == f.Status) &&
		(f.Stage == "" || e.Stage == f.Stage) &&
		(f.Client == "" || e.Client == f.Client) &&
		// Deadlines are YYYY-MM-DD, so they compare as strings; a job
		// without one matches no deadline range.
		(f.DeadlineAfter == "" || e.Deadline != "" && e.Deadline >= f.DeadlineAfter) &&
		(f.DeadlineBefore == "" || e.Deadline != "" && e.Deadline <= f.DeadlineBefore)
}

var (
	minNanos = time.Unix(0, math.MinInt64)
	maxNanos = time.Unix(0, math.MaxInt64)
)

// Nanos is t in Unix nanoseconds, clamped to what int64 holds; the zero
// time is the smallest.
func Nanos(t time.Time) int64 {
	switch {
	case t.IsZero(), t.Before(minNanos):
		return math.MinInt64
	case t.After(maxNanos):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// ValidCursor reports whether cursor can be an id of the kind: its prefix
// and a short run of id characters. Cursors are sealed by the API, so this
// only keeps an adapter's own mistakes out.
func ValidCursor(k practice.Kind, cursor string) bool {
	rest, ok := strings.CutPrefix(cursor, k.IDPrefix())
	if !ok || rest == "" || len(rest) > 200 {
		return false
	}
	for _, r := range rest {
		if r < 0x21 || r > 0x7e {
			return false
		}
	}
	return true
}
