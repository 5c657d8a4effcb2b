package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
)

// A Lister is a list operation of the client: ListJobs, ListClients,
// ListEvents, ListWebhookDeliveries, ...
type Lister[P any] func(ctx context.Context, params *P, reqEditors ...RequestEditorFn) (*http.Response, error)

// All walks a collection from params to its end: it asks for a page,
// yields its items as Item, and asks again with the page's next_cursor
// until has_more is false. It stops at the first error (a failed request,
// or an answer that is not a success, as an [*APIError]) and yields it.
// The filters of params hold on every page, as the cursor requires, and
// a Cursor in params resumes a walk.
//
// Item is what the page holds: JobOrTombstone for /v1/jobs (a record, or
// with include_deleted=true a tombstone), or Job where include_deleted is
// not asked for; a tombstone met as an Item that cannot hold one is an
// error rather than a record of zero values.
func All[Item, P any](ctx context.Context, list Lister[P], params *P) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		var zero Item
		var cursor string
		for {
			page, err := fetch[Item](ctx, list, params, cursor)
			if err != nil {
				yield(zero, err)
				return
			}
			for _, item := range page.Data {
				if !yield(item.v, nil) {
					return
				}
			}
			if !page.HasMore || page.NextCursor == nil || *page.NextCursor == "" {
				return
			}
			if *page.NextCursor == cursor {
				yield(zero, fmt.Errorf("practicegw: the page after %s named itself as the next", cursor))
				return
			}
			cursor = *page.NextCursor
		}
	}
}

// fetch asks for one page, after cursor ("" for the one params name).
func fetch[Item, P any](ctx context.Context, list Lister[P], params *P, cursor string) (*page[Item], error) {
	var editors []RequestEditorFn
	if cursor != "" {
		editors = append(editors, func(_ context.Context, req *http.Request) error {
			q := req.URL.Query()
			q.Set("cursor", cursor)
			req.URL.RawQuery = q.Encode()
			return nil
		})
	}
	resp, err := list(ctx, params, editors...)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if err := CheckResponse(resp, body); err != nil {
		return nil, err
	}
	var p page[Item]
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("practicegw: reading a page: %w", err)
	}
	return &p, nil
}

// page is the list envelope every collection answers, its items read as
// Item.
type page[Item any] struct {
	Data       []pageItem[Item] `json:"data"`
	HasMore    bool             `json:"has_more"`
	NextCursor *string          `json:"next_cursor"`
}

// pageItem reads one item, refusing a tombstone into a type that cannot
// tell it from a record.
type pageItem[Item any] struct{ v Item }

// errTombstone is what reading a tombstone as a record is.
var errTombstone = errors.New("practicegw: the page holds a tombstone (include_deleted=true): list it as the record's ...OrTombstone")

func (i *pageItem[Item]) UnmarshalJSON(b []byte) error {
	if _, holds := any(i.v).(interface{ AsTombstone() (Tombstone, error) }); !holds {
		if _, tombstone := any(i.v).(Tombstone); !tombstone {
			var t struct{ Deleted bool }
			if json.Unmarshal(b, &t) == nil && t.Deleted {
				return errTombstone
			}
		}
	}
	return json.Unmarshal(b, &i.v)
}

// Tombstoned reports whether an item of a page (a JobOrTombstone, a
// ClientOrTombstone, ...) is a removed record's tombstone, and answers it.
func Tombstoned(item interface{ AsTombstone() (Tombstone, error) }) (Tombstone, bool) {
	t, err := item.AsTombstone()
	return t, err == nil && bool(t.Deleted)
}
