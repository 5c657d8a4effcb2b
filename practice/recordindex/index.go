package recordindex

import (
	"encoding/json"

	"github.com/google/btree"

	"github.com/practicegw/practicegw/practice"
)

// Index is a kind's records in B-trees ordered by id: one of every
// record, and a posting list of every value of the fields that equality
// filters compare (owner, status, stage, client). A page filtered on one
// of them walks the records that can match rather than the whole kind, so
// that a filtered page of 50,000 work items costs about what a page of
// 500 does. B-trees rather than sorted slices: a backfill receives ids in
// any order (document ids are random), and inserting into a sorted slice
// moves half of it each time, which is quadratic over a backfill and
// is paid under the model's write lock. Like a Collection, the caller
// guards it.
type Index struct {
	all   *btree.BTreeG[*Entry]
	posts [numFields]map[string]*btree.BTreeG[*Entry]
	// free is the nodes every tree of the index gives back and takes:
	// one list, not one of 32 slots for each posting list (most of a
	// kind's client values have a few records each).
	free *btree.FreeListG[*Entry]
}

// degree is the B-trees' order: wide nodes, few allocations.
const degree = 32

func byID(a, b *Entry) bool { return a.ID < b.ID }

func (x *Index) newTree() *btree.BTreeG[*Entry] { return btree.NewWithFreeListG(degree, byID, x.free) }

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

// NewIndex indexes a collection.
func NewIndex(col Collection) *Index {
	x := &Index{free: btree.NewFreeListG[*Entry](btree.DefaultFreeListSize)}
	x.all = x.newTree()
	for i := range x.posts {
		x.posts[i] = map[string]*btree.BTreeG[*Entry]{}
	}
	for i := range col {
		x.Upsert(col[i])
	}
	return x
}

// Len is how many records the index holds.
func (x *Index) Len() int { return x.all.Len() }

// Find returns the entry with id, or nil; the entry must not be changed.
func (x *Index) Find(id string) *Entry {
	e, _ := x.all.Get(&Entry{ID: id})
	return e
}

// Each calls fn with every entry in id order.
func (x *Index) Each(fn func(*Entry)) {
	x.all.Ascend(func(e *Entry) bool { fn(e); return true })
}

// Upsert puts e in its place, replacing an entry with its id.
func (x *Index) Upsert(e Entry) {
	p := &e
	old, _ := x.all.ReplaceOrInsert(p)
	x.repost(old, p)
}

// Remove deletes the entry with id and reports whether there was one.
func (x *Index) Remove(id string) bool {
	old, ok := x.all.Delete(&Entry{ID: id})
	if ok {
		x.repost(old, nil)
	}
	return ok
}

// repost takes old (nil when none) out of the lists of its values and
// puts e (nil for a removal) in those of its own.
func (x *Index) repost(old, e *Entry) {
	var was, is [numFields]string
	if old != nil {
		was = fieldValues(old)
	}
	if e != nil {
		is = fieldValues(e)
	}
	for f := range numFields {
		if was[f] != "" && was[f] != is[f] {
			if list := x.posts[f][was[f]]; list != nil {
				list.Delete(old)
				if list.Len() == 0 {
					delete(x.posts[f], was[f])
				}
			}
		}
		if is[f] != "" {
			list := x.posts[f][is[f]]
			if list == nil {
				list = x.newTree()
				x.posts[f][is[f]] = list
			}
			list.ReplaceOrInsert(e)
		}
	}
}

// Page returns the page of q as Collection.Page does: up to limit entries
// after the cursor that match the filter, in id order. Filtered on an
// equality field, it walks the shortest posting list among them.
func (x *Index) Page(q practice.Query, limit int) practice.Page {
	cands := x.all
	found := false
	for f, v := range filterValues(q.Filter) {
		if v == "" {
			continue
		}
		list := x.posts[f][v]
		if list == nil {
			return practice.Page{Items: []json.RawMessage{}}
		}
		if !found || list.Len() < cands.Len() {
			cands, found = list, true
		}
	}
	m := newMatcher(q.Filter)
	page := practice.Page{Items: make([]json.RawMessage, 0, min(limit, cands.Len()))}
	last := ""
	visit := func(e *Entry) bool {
		if e.ID == q.Cursor || !m.Match(e) {
			return true
		}
		if len(page.Items) == limit {
			page.HasMore, page.Next = true, last
			return false
		}
		page.Items = append(page.Items, e.Raw)
		last = e.ID
		return true
	}
	if q.Cursor == "" {
		cands.Ascend(visit)
	} else {
		cands.AscendGreaterOrEqual(&Entry{ID: q.Cursor}, visit)
	}
	return page
}
