package demo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/practicegw/practicegw/practice"
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
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.cols[ki].Page(q, limit), nil
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
		return e.Raw, nil
	}
	return nil, notFound(k, id)
}
