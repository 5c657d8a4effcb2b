package sharepoint

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/practicegw/practicegw/adapters/kit/docstore"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// Changes reads the drive's delta feed: from the present when cursor is
// "" (token=latest, which lists nothing), else one page after cursor, an
// @odata.nextLink or @odata.deltaLink of an earlier page. Delta covers the
// whole drive and leaves the path out of parentReference, so each changed
// file is read again to learn whether and where it is under the filing
// root; a changed folder under the root has its documents listed again,
// since delta does not report the items below a renamed or moved folder.
// A 410 (resyncRequired) is practice.ErrFeedExpired.
func (a *Adapter) Changes(ctx context.Context, t practice.Tenant, cursor string) (practice.ChangesPage, error) {
	if err := a.Serves(t); err != nil {
		return practice.ChangesPage{}, err
	}
	drive, err := a.driveID(ctx)
	if err != nil {
		return practice.ChangesPage{}, err
	}
	delta := "/drives/" + url.PathEscape(drive) + "/root/delta"
	// Without deltaExcludeParent, delta names every folder above a
	// changed item, and each would be listed again.
	req := upstream.Request{Path: cursor, Header: http.Header{"deltaExcludeParent": {"true"}}}
	if cursor == "" {
		req.Path = delta
		req.Query = url.Values{"token": {"latest"}, "$top": {strconv.Itoa(a.cfg.PageSize)}, "$select": {deltaFields}}
	} else if !strings.HasPrefix(cursor, "/drives/") || !strings.Contains(cursor, "/delta") {
		return practice.ChangesPage{}, fmt.Errorf("graph: %q is not a delta link: %w", cursor, practice.ErrFeedExpired)
	}
	var body struct {
		Value     []driveItem `json:"value"`
		NextLink  string      `json:"@odata.nextLink"`
		DeltaLink string      `json:"@odata.deltaLink"`
	}
	_, err = a.c.JSON(ctx, req, "delta", &body)
	var s *practice.StatusError
	if errors.As(err, &s) && s.Status == http.StatusGone {
		// Not wrapped: a 410 is no missing record.
		return practice.ChangesPage{}, fmt.Errorf("graph: delta: %v: %w", err, practice.ErrFeedExpired)
	}
	if err != nil {
		return practice.ChangesPage{}, fmt.Errorf("graph: delta: %w", err)
	}
	page := docstore.FeedPage[driveItem]{More: body.NextLink != ""}
	link := body.DeltaLink
	if page.More {
		link = body.NextLink
	}
	if link != "" {
		if page.Next, err = a.c.Relative(link); err != nil {
			return practice.ChangesPage{}, err
		}
	}
	for _, it := range body.Value {
		switch {
		case it.ID == "":
			return practice.ChangesPage{}, upstream.Malformed(a.c.Label(), "delta", errors.New("an item without an id"))
		case it.Deleted != nil:
			page.Entries = append(page.Entries, docstore.FeedEntry[driveItem]{ID: it.ID, Gone: true})
		case it.Root != nil:
		case it.Folder != nil:
			page.Entries = append(page.Entries, docstore.FeedEntry[driveItem]{ID: it.ID, Folder: true})
		default:
			page.Entries = append(page.Entries, docstore.FeedEntry[driveItem]{ID: it.ID})
		}
	}
	return a.Feed(ctx, t, cursor, page)
}

// deltaFields are what the feed reads of an item: which it is, and what
// kind.
const deltaFields = "id,file,folder,root,deleted"
