package karbon

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// Karbon pages its lists itself: a page that is not the last carries
// @odata.nextLink, and the next page is read by following that link as
// given, never by building a $skip of our own (Karbon's description bounds
// $skip at 100, and a link is Karbon's to shape). Our page token over a
// Karbon collection is therefore "" for its first page or the next link,
// relative to the base URL ("/v3/WorkItems?$top=51&$skip=51"), so a cursor
// cannot point our credentials anywhere else.

// pageLink is the request for the page at token of the collection at
// path. Cursors issued before tokens were next links held a $skip; the
// start ("0") still reads, a later one is refused, to be paged again from
// the start, rather than shaping a request Karbon did not give.
func pageLink(path, token string) (link string, first bool, err error) {
	switch {
	case token == "" || token == "0":
		return "", true, nil
	case strings.HasPrefix(token, path+"?"):
		return token, false, nil
	case isDigits(token):
		return "", false, &practice.InvalidError{Code: "invalid_cursor", Param: "cursor",
			Message: "This cursor comes from before the gateway followed Karbon's own paging links; read the collection again from its first page."}
	}
	return "", false, errBadCursor()
}

func isDigits(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

func errBadCursor() error {
	return &practice.InvalidError{Code: "invalid_cursor", Param: "cursor",
		Message: "The cursor is not one this collection issued; pass the next_cursor of the previous page."}
}

// odataPage reads the page at token of the collection at path: the first
// page asks for top items with the options in q ($filter, $orderby; nil
// for none); a later one is the next link as Karbon gave it, which carries
// them on. next is the link to the page after, relative to the base URL,
// "" on the last. what names the collection in errors.
func odataPage[T any](ctx context.Context, a *Adapter, path, what string, q url.Values, token string, top int) (items []T, next string, err error) {
	link, first, err := pageLink(path, token)
	if err != nil {
		return nil, "", err
	}
	req := upstream.Request{Path: link}
	if first {
		params := url.Values{"$top": {strconv.Itoa(top)}}
		for k, v := range q {
			params[k] = v
		}
		link = path + "?" + upstream.EncodeQuery(params)
		req = upstream.Request{Path: link}
	}
	var l odataList[T]
	if _, err := a.c.JSON(ctx, req, what, &l); err != nil {
		return nil, "", fmt.Errorf("karbon: list %s: %w", what, err)
	}
	if l.NextLink == "" {
		return l.Value, "", nil
	}
	next, err = a.c.Relative(l.NextLink)
	if err != nil {
		return nil, "", err
	}
	if _, first, err := pageLink(path, next); err != nil || first {
		return nil, "", upstream.Malformed(a.c.Label(), what, fmt.Errorf("next link %q is not a page of %s", l.NextLink, path))
	}
	if next == link {
		// The first page is asked for without a token, so a walk would
		// not see this repeat until it had read the page twice.
		return nil, "", &paging.CycleError{Token: next}
	}
	return l.Value, next, nil
}
