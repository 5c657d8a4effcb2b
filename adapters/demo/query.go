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
	var page practice.Page
	err := r.read(t, func(ts *tenant) {
		page = ts.cols[ki].Page(q, limit)
		for i, raw := range page.Items {
			page.Items[i] = ts.linked(k, raw)
		}
	})
	return page, err
}

// Get returns one record. An id of another firm, of the sandbox when t is
// live (or the reverse), or of another kind is not found.
func (r *Records) Get(_ context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	if _, ok := kindIndex(k); !ok {
		return nil, fmt.Errorf("demo: unknown kind %q", k)
	}
	var raw json.RawMessage
	err := r.read(t, func(ts *tenant) {
		if e := ts.find(k, id); e != nil {
			raw = ts.linked(k, e.Raw)
		}
	})
	if err != nil || raw != nil {
		return raw, err
	}
	return nil, notFound(k, id)
}
