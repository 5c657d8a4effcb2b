package docstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// A store's change feed (Graph delta, Drive changes, Dropbox
// list_folder/continue) names items, not documents: a store's adapter
// reads one vendor page into FeedEntries and Feed turns them into the
// /v1 documents changed and gone, converted as List and Get convert them.

// FeedEntry is one item a store's change feed named.
type FeedEntry[T any] struct {
	// ID is the store's item id.
	ID string
	// Gone says the item was deleted, trashed or has left the root.
	Gone bool
	// Folder says the item is a folder that was added, renamed or moved:
	// the paths, kinds and clients of the documents below it may have
	// changed while the feed names none of them, so they are listed
	// again (Source.Folder says where it is).
	Folder bool
	// Item is the document as the feed gave it and Rel its folder below
	// the root, when Located; otherwise the item is read again
	// (Source.Read), which says whether and where it is a document now.
	Item    T
	Rel     string
	Located bool
}

// FeedPage is one page of a store's change feed.
type FeedPage[T any] struct {
	Entries []FeedEntry[T]
	// Next is the store's position after the page, More whether the
	// store has more changes right away.
	Next string
	More bool
}

// feedWidth is how many items of one feed page are read at a time.
const feedWidth = 4

// Serves refuses a tenant whose documents the store does not hold, as
// List and Get do.
func (s *Store[T]) Serves(t practice.Tenant) error {
	if !s.serves(t) {
		return fmt.Errorf("%s: no records for %s: %w", s.src.System, t, practice.ErrNotFound)
	}
	return nil
}

// Feed turns a page of the store's change feed, read after cursor, into
// the documents changed and gone. When the feed names an item more than
// once, its last entry decides.
func (s *Store[T]) Feed(ctx context.Context, t practice.Tenant, cursor string, p FeedPage[T]) (practice.ChangesPage, error) {
	if err := s.Serves(t); err != nil {
		return practice.ChangesPage{}, err
	}
	if p.Next == "" {
		return practice.ChangesPage{}, upstream.Malformed(s.src.Label, "change feed", errors.New("no position to go on from"))
	}
	if p.More && p.Next == cursor {
		// The caller would read the same page for ever.
		return practice.ChangesPage{}, fmt.Errorf("%s: change feed: %w", s.src.System, &paging.CycleError{Token: p.Next})
	}
	results := make([][]feedResult, len(p.Entries))
	err := paging.Parallel(ctx, feedWidth, len(p.Entries), func(ctx context.Context, i int) error {
		var err error
		results[i], err = s.resolve(ctx, t, p.Entries[i])
		return err
	})
	if err != nil {
		return practice.ChangesPage{}, err
	}
	final := map[string]json.RawMessage{}
	var order []string
	for _, rs := range results {
		for _, r := range rs {
			if _, ok := final[r.id]; !ok {
				order = append(order, r.id)
			}
			final[r.id] = r.raw
		}
	}
	out := practice.ChangesPage{Changed: []json.RawMessage{}, Gone: []string{}, Next: p.Next, More: p.More}
	for _, id := range order {
		if raw := final[id]; raw != nil {
			out.Changed = append(out.Changed, raw)
		} else {
			out.Gone = append(out.Gone, id)
		}
	}
	return out, nil
}

// feedResult is a document changed (raw) or gone (raw nil).
type feedResult struct {
	id  string
	raw json.RawMessage
}

func (s *Store[T]) resolve(ctx context.Context, t practice.Tenant, e FeedEntry[T]) ([]feedResult, error) {
	gone := []feedResult{{id: filing.DocID(e.ID)}}
	switch {
	case e.Gone:
		return gone, nil
	case e.Folder:
		return s.folder(ctx, t, e.ID)
	case !e.Located:
		it, rel, err := s.src.Read(ctx, e.ID)
		if errors.Is(err, practice.ErrNotFound) {
			return gone, nil
		}
		if err != nil {
			return nil, err
		}
		e.Item, e.Rel = it, rel
	}
	id, raw, err := s.documentID(ctx, t, e.Item, e.Rel)
	if err != nil {
		return nil, err
	}
	return []feedResult{{id: id, raw: raw}}, nil
}

// folder lists the documents below a changed folder again. A folder
// outside the root is nothing of ours, and the root itself changing
// says nothing of the paths below it.
func (s *Store[T]) folder(ctx context.Context, t practice.Tenant, id string) ([]feedResult, error) {
	if s.src.Folder == nil {
		return nil, nil
	}
	rel, ok, err := s.src.Folder(ctx, id)
	if err != nil || !ok || rel == "" || rel == "/" {
		return nil, err
	}
	var out []feedResult
	w := paging.Walk[T]{
		Fetch: s.src.Fetch, ID: s.src.ID, Descend: s.src.Descend, Match: s.src.IsDocument,
		Convert: func(ctx context.Context, found []paging.Found[T]) ([]json.RawMessage, error) {
			for _, f := range found {
				id, raw, err := s.documentID(ctx, t, f.Item, f.Path)
				if err != nil {
					return nil, err
				}
				out = append(out, feedResult{id: id, raw: raw})
			}
			// Kept here rather than in the page, so the walk reads on
			// to the folder's end.
			return make([]json.RawMessage, len(found)), nil
		},
		MaxPages: s.src.MaxPages, MaxDepth: s.src.MaxDepth,
	}
	page, err := w.Collect(ctx, paging.Frame{Folder: id, Path: rel}, paging.Cursor{}, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	if page.HasMore {
		return nil, fmt.Errorf("%s: folder %s changed and holds more than %d pages of items: %w",
			s.src.System, rel, s.src.MaxPages, practice.ErrFeedExpired)
	}
	return out, nil
}
