package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/practice"
)

// includeDeleted is the collections' parameter that lists tombstones of
// removed records among the records.
const includeDeleted = "include_deleted"

// tombstoneLister is a reader that keeps what removals leave: the read
// model of a firm's real systems. The demo records are never removed, so
// they have no tombstones to list.
type tombstoneLister interface {
	Tombstones(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.TombstoneQuery) ([]practice.Tombstone, error)
}

// wantsTombstones takes include_deleted out of a collection's parameters
// and reports whether it asks for tombstones. A tombstone keeps nothing
// but its id and times, so no filter but updated_since can be applied to
// it: combined with another, it is refused rather than half applied.
func wantsTombstones(params map[string]string) (bool, error) {
	v, ok := params[includeDeleted]
	if !ok {
		return false, nil
	}
	delete(params, includeDeleted)
	if v != "true" {
		return false, nil
	}
	for name := range params {
		if name != "updated_since" {
			return false, apierror.New(http.StatusBadRequest, "parameter_invalid",
				fmt.Sprintf("include_deleted=true can be combined with updated_since, limit and cursor only; %s cannot be applied to a removed record.", name)).WithParam(includeDeleted)
		}
	}
	return true, nil
}

// withTombstones merges the kind's tombstones into a page of records, in
// id order as records are paged, so that one cursor (the last id
// answered) pages both and a record added or removed while a caller pages
// is neither skipped nor repeated. The page holds the first limit records
// after the cursor; its tombstones are read from the same cursor, and the
// merge stops at limit items, so an item it answers is never passed over
// by a record or tombstone the next page would hold. A record and a
// tombstone of one id (a removal being applied) answer as the record.
func withTombstones(ctx context.Context, reader practice.Reader, t practice.Tenant, k practice.Kind, q practice.Query, page practice.Page) (practice.Page, error) {
	tl, ok := reader.(tombstoneLister)
	if !ok {
		return page, nil
	}
	tombs, err := tl.Tombstones(ctx, t, k, practice.TombstoneQuery{Since: q.Filter.UpdatedSince, After: q.Cursor, Limit: q.Limit + 1})
	if err != nil {
		return practice.Page{}, err
	}
	if len(tombs) == 0 {
		return page, nil
	}
	ids := make([]string, len(page.Items))
	for i, item := range page.Items {
		var rec struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(item, &rec); err != nil {
			return practice.Page{}, fmt.Errorf("%s page: %w", k, err)
		}
		ids[i] = rec.ID
	}
	out := practice.Page{Items: make([]json.RawMessage, 0, q.Limit)}
	i, j, last := 0, 0, ""
	for len(out.Items) < q.Limit && (i < len(ids) || j < len(tombs)) {
		if j == len(tombs) || i < len(ids) && strings.Compare(ids[i], tombs[j].ID) <= 0 {
			if j < len(tombs) && ids[i] == tombs[j].ID {
				j++
			}
			out.Items = append(out.Items, page.Items[i])
			last = ids[i]
			i++
			continue
		}
		raw, err := json.Marshal(tombs[j])
		if err != nil {
			return practice.Page{}, err
		}
		out.Items = append(out.Items, raw)
		last = tombs[j].ID
		j++
	}
	if i < len(ids) || page.HasMore || j < len(tombs) {
		out.HasMore, out.Next = true, last
	}
	return out, nil
}
