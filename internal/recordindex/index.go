package recordindex

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/practicegw/practicegw/internal/practice"
)

// Index is a Collection with a posting list, sorted by id, of every value
// of the fields that equality filters compare (owner, status, stage,
// client). A page filtered on one of them reads the ids of the records
// that can match rather than the whole collection, so that a filtered
// page of 50,000 work items costs about what a page of 500 does. Like a
// Collection, the caller guards it.
type Index struct {
	col Collection
	// posts hold copies of the entries, so that a filtered page compares
	// the candidates it walks without looking each up.
	posts [numFields]map[string][]*Entry
}

// The fields with posting lists, in Entry.
const (
	fieldOwner = iota
	fieldStatus
	fieldStage
	fieldClient
	numFields
)

func fieldValues(e *Entry) [numFields]string {
	return [numFields]string{e.Owner, e.Status, e.Stage, e.Client}
}

func filterValues(f practice.Filter) [numFields]string {
	return [numFields]string{f.Owner, f.Status, f.Stage, f.Client}
}

// NewIndex indexes a collection, which it takes over.
func NewIndex(col Collection) *Index {
	x := &Index{col: col}
	for i := range x.posts {
		x.posts[i] = map[string][]*Entry{}
	}
	// The collection is in id order, so every list is built sorted.
	for i := range col {
		e := col[i]
		for f, v := range fieldValues(&e) {
			if v != "" {
				x.posts[f][v] = append(x.posts[f][v], &e)
			}
		}
	}
	return x
}

// Len is how many records the index holds.
func (x *Index) Len() int { return len(x.col) }

// Find returns the entry with id, or nil; the pointer is valid until the
// index next changes.
func (x *Index) Find(id string) *Entry { return x.col.Find(id) }

// Each calls fn with every entry in id order.
func (x *Index) Each(fn func(*Entry)) {
	for i := range x.col {
		fn(&x.col[i])
	}
}

// Upsert puts e in its place, replacing an entry with its id.
func (x *Index) Upsert(e Entry) {
	var old [numFields]string
	if cur := x.col.Find(e.ID); cur != nil {
		old = fieldValues(cur)
	}
	x.repost(e.ID, old, &e)
	x.col.Upsert(e)
}

// Remove deletes the entry with id and reports whether there was one.
func (x *Index) Remove(id string) bool {
	cur := x.col.Find(id)
	if cur == nil {
		return false
	}
	x.repost(id, fieldValues(cur), nil)
	return x.col.Remove(id)
}

// repost takes id out of the lists of its old values and puts e (nil for a
// removal) in those of its values.
func (x *Index) repost(id string, old [numFields]string, e *Entry) {
	var cur [numFields]string
	if e != nil {
		cur = fieldValues(e)
	}
	byID := func(p *Entry, id string) int { return strings.Compare(p.ID, id) }
	for f := range numFields {
		if old[f] != "" {
			list := x.posts[f][old[f]]
			if i, ok := slices.BinarySearchFunc(list, id, byID); ok {
				if old[f] == cur[f] {
					list[i] = e
					continue
				}
				list = slices.Delete(list, i, i+1)
			}
			if len(list) == 0 {
				delete(x.posts[f], old[f])
			} else {
				x.posts[f][old[f]] = list
			}
		}
		if cur[f] != "" {
			list := x.posts[f][cur[f]]
			i, _ := slices.BinarySearchFunc(list, id, byID)
			x.posts[f][cur[f]] = slices.Insert(list, i, e)
		}
	}
}

// Page returns the page of q as Collection.Page does. Filtered on an
// equality field, it walks the shortest posting list among them.
func (x *Index) Page(q practice.Query, limit int) practice.Page {
	var cands []*Entry
	found := false
	for f, v := range filterValues(q.Filter) {
		if v == "" {
			continue
		}
		list := x.posts[f][v]
		if !found || len(list) < len(cands) {
			cands, found = list, true
		}
	}
	if !found {
		return x.col.Page(q, limit)
	}
	m := NewMatcher(q.Filter)
	start := 0
	if q.Cursor != "" {
		start, _ = slices.BinarySearchFunc(cands, q.Cursor, func(p *Entry, id string) int { return strings.Compare(p.ID, id) })
		if start < len(cands) && cands[start].ID == q.Cursor {
			start++
		}
	}
	page := practice.Page{Items: make([]json.RawMessage, 0, min(limit, len(cands)-start))}
	last := ""
	for _, e := range cands[start:] {
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
