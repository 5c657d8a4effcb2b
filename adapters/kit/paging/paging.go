// Package paging walks a vendor's own pages (flat lists and folder trees)
// to fill one /v1 page, and keeps where it stopped in an opaque cursor.
package paging

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/practicegw/practicegw/practice"
)

// Cursor is an adapter's continuation token (practice.Query.Cursor and
// Page.Next): where the next item sits in the vendor's own paging. Vendor
// pages rarely line up with ours, so a position is a vendor page plus an
// index into it, and the id of the item before, which finds the place
// again when records were added or removed before it in the meantime.
// Tree walks (document folders) keep one frame per folder level.
type Cursor struct {
	Stack []Frame `json:"s"`
}

// Frame is the position within one listing.
type Frame struct {
	// Folder is the vendor id of the folder listed; empty for flat lists.
	Folder string `json:"f,omitempty"`
	// Path is the folder's path from the walk's root, for documents.
	Path string `json:"p,omitempty"`
	// Page is the vendor's token for the page holding the next item: an
	// offset, a page number, a next link relative to the base URL or an
	// opaque vendor cursor. Empty is the first page.
	Page string `json:"t,omitempty"`
	// Index is the next item's position in that page.
	Index int `json:"i,omitempty"`
	// Last is the vendor id of the item just before it.
	Last string `json:"l,omitempty"`
}

const cursorVersion = "u1."

// Encode makes the token; the API wraps it in its own cur_ cursor.
func (c Cursor) Encode() string {
	b, _ := json.Marshal(c)
	return cursorVersion + base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor reads a token made by Encode; the empty token is the start.
// Anything else is the API's invalid_cursor.
func DecodeCursor(s string) (Cursor, error) {
	var c Cursor
	if s == "" {
		return c, nil
	}
	if len(s) < len(cursorVersion) || s[:len(cursorVersion)] != cursorVersion {
		return c, errInvalidCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(s[len(cursorVersion):])
	if err != nil || json.Unmarshal(b, &c) != nil || len(c.Stack) == 0 || len(c.Stack) > 32 {
		return Cursor{}, errInvalidCursor
	}
	for _, f := range c.Stack {
		if f.Index < 0 {
			return Cursor{}, errInvalidCursor
		}
	}
	return c, nil
}

var errInvalidCursor = &practice.InvalidError{Code: "invalid_cursor", Param: "cursor",
	Message: "The cursor is not one this collection issued; pass the next_cursor of the previous page."}

// CycleError is a vendor listing whose next page is one the walk has
// already read: an answer we cannot use (practice.ErrBadUpstream, a 502),
// not a reason to read on.
type CycleError struct {
	Folder, Token string
}

func (e *CycleError) Error() string {
	if e.Folder == "" {
		return fmt.Sprintf("vendor paging repeats: the next page %q was already read", e.Token)
	}
	return fmt.Sprintf("vendor paging repeats: the next page %q of folder %q was already read", e.Token, e.Folder)
}

func (e *CycleError) Is(target error) bool { return target == practice.ErrBadUpstream }

// VendorPage is one page of a vendor listing; Next is the token of the
// following page, empty on the last.
type VendorPage[T any] struct {
	Items []T
	Next  string
	// Total is how many items the whole listing holds, when the vendor
	// says (Xero's pagination.itemCount); 0 when it does not.
	Total int
}

// Found is a leaf item the walk kept, with the path of its folder.
type Found[T any] struct {
	Item T
	Path string
}

// Walk lists a vendor collection into pages of ours: flat (a vendor list)
// or as a tree (folders of a document store, depth first). It fetches
// vendor pages until Limit items pass the filters or the vendor runs out,
// so nothing is dropped at a page boundary, and stops early after MaxPages
// vendor pages, answering with fewer items and HasMore set rather than
// scanning without bound: a filter that matches little costs the caller
// more pages, never missing records.
type Walk[T any] struct {
	// Fetch returns the page at token of folder's listing.
	Fetch func(ctx context.Context, folder, token string) (VendorPage[T], error)
	// ID is an item's vendor id.
	ID func(T) string
	// Descend says whether an item is a folder to walk into, with its
	// id and name; nil walks flat.
	Descend func(T) (folder, name string, ok bool)
	// Match is the filter the vendor item alone can answer; nil keeps
	// every leaf.
	Match func(T) bool
	// Convert turns kept leaves into /v1 JSON, in order; a nil entry
	// drops its item (a filter that needed more than the vendor item). A
	// *Partial error (Each's) keeps the others of records it could not
	// use, which the page names (practice.Page.Unusable).
	Convert func(ctx context.Context, items []Found[T]) ([]json.RawMessage, error)
	// MaxPages bounds the vendor pages one call fetches [10].
	MaxPages int
	// MaxDepth bounds how deep a tree walk goes below its root [8].
	MaxDepth int
}

// Collect returns up to limit items from cur (the start of root when cur
// is empty).
func (w *Walk[T]) Collect(ctx context.Context, root Frame, cur Cursor, limit int) (practice.Page, error) {
	c := w.start(root, cur, limit)
	// The vendor pages read this call: a page is fetched at most once a
	// call, which also tells a next link that cycles. It is kept apart
	// from c, whose frames and items leave with the page, so that it
	// stays off the heap.
	cache := map[pageKey]VendorPage[T]{}
	for len(c.stack) > 0 {
		if err := ctx.Err(); err != nil {
			return practice.Page{}, err
		}
		page, ok, err := c.topPage(ctx, cache)
		if err != nil {
			return practice.Page{}, err
		}
		if !ok {
			// Out of vendor pages for this call: say so rather than scan on.
			return w.page(&c, true, c.stack), nil
		}
		descended, err := c.fill(ctx, page)
		if err != nil {
			return practice.Page{}, err
		}
		if descended {
			continue
		}
		if len(c.out) >= limit {
			return c.full(page), nil
		}
		if err := c.advance(page, cache); err != nil {
			return practice.Page{}, err
		}
	}
	return w.page(&c, false, nil), nil
}

// pageKey names one vendor page of one folder's listing.
type pageKey struct{ folder, token string }

// collection is one Collect call in progress: the frames still to walk,
// the vendor pages fetched and the items kept.
type collection[T any] struct {
	w                  *Walk[T]
	limit              int
	maxPages, maxDepth int
	stack              []Frame
	fetched, total     int
	out                []json.RawMessage
	unusable           []*practice.UnusableError
}

// start sets up a call from cur, or from root when cur is empty, with the
// Walk's bounds or their defaults.
func (w *Walk[T]) start(root Frame, cur Cursor, limit int) collection[T] {
	c := collection[T]{w: w, limit: limit, maxPages: w.MaxPages, maxDepth: w.MaxDepth, stack: cur.Stack}
	if c.maxPages <= 0 {
		c.maxPages = 10
	}
	if c.maxDepth <= 0 {
		c.maxDepth = 8
	}
	if len(c.stack) == 0 {
		c.stack = []Frame{root}
	}
	return c
}

// top is the frame being walked. It is taken afresh after each change to
// the stack, since a descent may move the stack's backing array.
func (c *collection[T]) top() *Frame { return &c.stack[len(c.stack)-1] }

// topPage returns the vendor page the top frame stands in. A page not in
// cache is fetched, unless the call's budget of vendor pages is spent (ok
// false), and the frame's index is found again in it, since the listing
// may have changed since the cursor was made.
func (c *collection[T]) topPage(ctx context.Context, cache map[pageKey]VendorPage[T]) (page VendorPage[T], ok bool, err error) {
	top := c.top()
	key := pageKey{top.Folder, top.Page}
	if page, ok := cache[key]; ok {
		return page, true, nil
	}
	if c.fetched == c.maxPages {
		return VendorPage[T]{}, false, nil
	}
	if page, err = c.w.Fetch(ctx, top.Folder, top.Page); err != nil {
		return VendorPage[T]{}, false, err
	}
	c.fetched++
	c.total = max(c.total, page.Total)
	cache[key] = page
	top.Index = c.w.locate(page.Items, *top)
	return page, true, nil
}

// fill keeps items of page until the limit is reached, the page ends or
// the walk descends into a folder (descended).
func (c *collection[T]) fill(ctx context.Context, page VendorPage[T]) (descended bool, err error) {
	for c.top().Index < len(page.Items) && len(c.out) < c.limit && !descended {
		var chunk []Found[T]
		chunk, descended = c.take(page)
		if err := c.convert(ctx, chunk); err != nil {
			return false, err
		}
	}
	return descended, nil
}

// take moves the top frame over the leaves that follow it in page, keeping
// those that match, up to the room left; it stops at a folder so that
// items keep their order: what precedes a folder is converted before the
// folder is walked. It steps over the folder itself, into it (descended)
// unless that would go deeper than maxDepth.
func (c *collection[T]) take(page VendorPage[T]) (chunk []Found[T], descended bool) {
	top := c.top()
	room := c.limit - len(c.out)
	chunk = make([]Found[T], 0, min(room, len(page.Items)-top.Index))
	for top.Index < len(page.Items) && len(chunk) < room {
		it := page.Items[top.Index]
		folder, name, isFolder := c.w.folder(it)
		if isFolder && len(chunk) > 0 {
			return chunk, false
		}
		top.Index++
		top.Last = c.w.ID(it)
		if isFolder {
			return chunk, c.descend(Frame{Folder: folder, Path: top.Path + "/" + name})
		}
		if c.w.Match == nil || c.w.Match(it) {
			chunk = append(chunk, Found[T]{Item: it, Path: top.Path})
		}
	}
	return chunk, false
}

// folder is Descend, for flat walks too.
func (w *Walk[T]) folder(it T) (folder, name string, ok bool) {
	if w.Descend == nil {
		return "", "", false
	}
	return w.Descend(it)
}

// descend pushes a folder's frame unless the walk is already maxDepth
// below its root; a folder deeper than that is skipped, not an error.
func (c *collection[T]) descend(f Frame) bool {
	if len(c.stack) > c.maxDepth {
		return false
	}
	c.stack = append(c.stack, f)
	return true
}

// convert adds the /v1 form of the kept items to the page, dropping those
// Convert answers nil for; those it could not use (a *Partial) the page
// names as unusable.
func (c *collection[T]) convert(ctx context.Context, chunk []Found[T]) error {
	if len(chunk) == 0 {
		return nil
	}
	conv, err := c.w.Convert(ctx, chunk)
	var partial *Partial
	if errors.As(err, &partial) {
		c.unusable = append(c.unusable, partial.Unusable...)
		err = nil
	}
	if err != nil {
		return err
	}
	c.out = slices.Grow(c.out, len(conv))
	for _, raw := range conv {
		if raw != nil {
			c.out = append(c.out, raw)
		}
	}
	return nil
}

// full answers a page that reached its limit, with a cursor at the item
// after the last one kept. HasMore is set when anything may still follow:
// a next vendor page, an item of this page that may pass the filter, or a
// parent folder that may go on.
func (c *collection[T]) full(page VendorPage[T]) practice.Page {
	top := c.top()
	more := page.Next != "" || c.w.anyLeft(page.Items[top.Index:])
	switch {
	case top.Index < len(page.Items):
		more = more || len(c.stack) > 1
	case page.Next != "":
		*top = Frame{Folder: top.Folder, Path: top.Path, Page: page.Next}
	default:
		// This listing is done; its parent (if any) may go on.
		c.stack = c.stack[:len(c.stack)-1]
		more = len(c.stack) > 0
	}
	return c.w.page(c, more, c.stack)
}

// advance moves past a page read to its end: to the vendor's next page of
// the same listing, or back up to the parent folder when there is none.
func (c *collection[T]) advance(page VendorPage[T], cache map[pageKey]VendorPage[T]) error {
	top := c.top()
	if page.Next == "" {
		c.stack = c.stack[:len(c.stack)-1]
		return nil
	}
	if _, seen := cache[pageKey{top.Folder, page.Next}]; seen {
		// A next link that repeats or cycles would read the same pages
		// for ever.
		return &CycleError{Folder: top.Folder, Token: page.Next}
	}
	*top = Frame{Folder: top.Folder, Path: top.Path, Page: page.Next}
	return nil
}

func (w *Walk[T]) page(c *collection[T], more bool, stack []Frame) practice.Page {
	p := practice.Page{Items: c.out, HasMore: more, Total: c.total, Unusable: c.unusable}
	if p.Items == nil {
		p.Items = []json.RawMessage{}
	}
	if more {
		p.Next = Cursor{Stack: stack}.Encode()
	}
	return p
}

// anyLeft reports whether the rest of a page may still give an item.
func (w *Walk[T]) anyLeft(items []T) bool {
	for _, it := range items {
		if w.Descend != nil {
			if _, _, ok := w.Descend(it); ok {
				return true
			}
		}
		if w.Match == nil || w.Match(it) {
			return true
		}
	}
	return false
}

// locate finds where to resume in a refetched page: after the item the
// cursor saw last, wherever it moved to, or at the saved index when that
// item is gone.
func (w *Walk[T]) locate(items []T, f Frame) int {
	i := min(max(f.Index, 0), len(items))
	if f.Last == "" {
		return i
	}
	if i > 0 && w.ID(items[i-1]) == f.Last {
		return i
	}
	for j, it := range items {
		if w.ID(it) == f.Last {
			return j + 1
		}
	}
	return i
}

// All reads a whole vendor listing, page after page from the first,
// handing each item to each in order: a look at every record, such as
// the one an adapter takes at start-up. It ends with a *CycleError when
// the vendor names as next a page the walk has already read (which would
// read the same pages for ever), and with ctx's error once ctx is done.
func All[T any](ctx context.Context, fetch func(ctx context.Context, token string) (VendorPage[T], error), each func(context.Context, T) error) error {
	read := map[string]bool{}
	token := ""
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		read[token] = true
		page, err := fetch(ctx, token)
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			if err := each(ctx, it); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		if read[page.Next] {
			return &CycleError{Token: page.Next}
		}
		token = page.Next
	}
}

// Parallel runs fn for 0..n-1 with at most width at a time and returns the
// first error, cancelling the rest. Its goroutines end before it returns.
// Adapters use it in a Walk's Convert for detail reads that a vendor's
// list does not inline.
func Parallel(ctx context.Context, width, n int, fn func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(max(width, 1))
	for i := range n {
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}

// Partial is the error of a conversion that could not use some records'
// vendor answers: the others are converted, and Unusable says which and
// why. A Walk keeps the others and names these on its page.
type Partial struct {
	Unusable []*practice.UnusableError
}

func (p *Partial) Error() string {
	return fmt.Sprintf("%d records' vendor answers cannot be used, the first %v", len(p.Unusable), p.Unusable[0])
}

// Each converts items 0..n-1 with fn, at most width at a time, for a
// Walk's Convert: a nil answer drops its item. A record whose vendor
// answer cannot be used (fn returns a *practice.UnusableError, as
// practice.Unusable makes one) stalls none of the others: it is left out
// and named in a *Partial error, with the others converted. Any other
// error is the listing's: it cancels the rest and is returned.
func Each(ctx context.Context, width, n int, fn func(ctx context.Context, i int) (json.RawMessage, error)) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, n)
	bad := make([]*practice.UnusableError, n)
	err := Parallel(ctx, width, n, func(ctx context.Context, i int) error {
		raw, err := fn(ctx, i)
		if errors.As(err, &bad[i]) {
			return nil
		}
		out[i] = raw
		return err
	})
	if err != nil {
		return nil, err
	}
	var partial Partial
	for _, u := range bad {
		if u != nil {
			partial.Unusable = append(partial.Unusable, u)
		}
	}
	if len(partial.Unusable) > 0 {
		return out, &partial
	}
	return out, nil
}
