package karbon

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/practicegw/practicegw/adapters/upstream"
	"github.com/practicegw/practicegw/internal/practice"
)

// Our cursors over a Karbon collection carry the OData $skip of the next
// page, so that a page is never cut short at Karbon's own page size.

// skipToken reads a page token that is a $skip; "" is the first page.
func skipToken(token string) (int, error) {
	if token == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(token)
	if err != nil || n < 0 {
		return 0, errBadCursor()
	}
	return n, nil
}

func errBadCursor() error {
	return &practice.InvalidError{Code: "invalid_cursor", Param: "cursor",
		Message: "The cursor is not one this collection issued; pass the next_cursor of the previous page."}
}

// odataPage reads top items of the collection at path from skip, filtered
// when filter is set. next is the $skip of the page after, or -1 when
// Karbon sent no nextLink. what names the collection in errors.
func odataPage[T any](ctx context.Context, a *Adapter, path, what, filter string, skip, top int) (items []T, next int, err error) {
	q := url.Values{"$top": {strconv.Itoa(top)}}
	if skip > 0 {
		q.Set("$skip", strconv.Itoa(skip))
	}
	if filter != "" {
		q.Set("$filter", filter)
	}
	var l odataList[T]
	if _, err := a.c.JSON(ctx, upstream.Request{Path: path, Query: q}, what, &l); err != nil {
		return nil, 0, fmt.Errorf("karbon: list %s: %w", what, err)
	}
	if l.NextLink == "" {
		return l.Value, -1, nil
	}
	next, err = skipOf(l.NextLink, skip+len(l.Value))
	if err != nil {
		return nil, 0, upstream.Malformed(a.c.Label(), "next link", err)
	}
	return l.Value, next, nil
}
