package googledrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/practicegw/practicegw/adapters/kit/docstore"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// Changes reads Drive's changes feed: from the present when cursor is ""
// (changes.getStartPageToken), else one page of changes.list after
// cursor, a nextPageToken or newStartPageToken of an earlier page. The
// feed covers the whole account (or shared drive), so a changed file is
// placed by walking its parents as Get does: one that is removed,
// trashed or no longer below the root folder is gone. A changed folder
// below the root has its documents listed again, since Drive reports no
// change to the files below a renamed or moved folder. A page token Drive
// refuses is practice.ErrFeedExpired.
func (a *Adapter) Changes(ctx context.Context, t practice.Tenant, cursor string) (practice.ChangesPage, error) {
	if err := a.Serves(t); err != nil {
		return practice.ChangesPage{}, err
	}
	q := a.query(url.Values{})
	// changes.list and getStartPageToken take no corpora.
	q.Del("corpora")
	if cursor == "" {
		q.Del("includeItemsFromAllDrives")
		var body struct {
			StartPageToken string `json:"startPageToken"`
		}
		if _, err := a.c.JSON(ctx, upstream.Request{Path: "/changes/startPageToken", Query: q}, "start page token", &body); err != nil {
			return practice.ChangesPage{}, fmt.Errorf("gdrive: start changes: %w", err)
		}
		return a.Feed(ctx, t, cursor, docstore.FeedPage[file]{Next: body.StartPageToken})
	}
	q.Set("pageToken", cursor)
	q.Set("pageSize", strconv.Itoa(a.cfg.PageSize))
	q.Set("includeRemoved", "true")
	q.Set("fields", "nextPageToken,newStartPageToken,changes(changeType,removed,fileId,file("+fileFields+"))")
	var body struct {
		Changes []struct {
			ChangeType string `json:"changeType"`
			Removed    bool   `json:"removed"`
			FileID     string `json:"fileId"`
			File       *file  `json:"file"`
		} `json:"changes"`
		NextPageToken     string `json:"nextPageToken"`
		NewStartPageToken string `json:"newStartPageToken"`
	}
	_, err := a.c.JSON(ctx, upstream.Request{Path: "/changes", Query: q}, "changes", &body)
	if refusedToken(err) {
		return practice.ChangesPage{}, fmt.Errorf("gdrive: changes: %v: %w", err, practice.ErrFeedExpired)
	}
	if err != nil {
		return practice.ChangesPage{}, fmt.Errorf("gdrive: changes: %w", err)
	}
	page := docstore.FeedPage[file]{Next: body.NewStartPageToken}
	if body.NextPageToken != "" {
		page.Next, page.More = body.NextPageToken, true
	}
	// Folders first, so the files of this page are placed by their
	// folders' names and parents as they are now.
	for _, c := range body.Changes {
		if f := c.File; f != nil && f.MimeType == folderType && !f.Trashed && len(f.Parents) > 0 {
			a.folders.put(f.ID, folderInfo{name: f.Name, parent: f.Parents[0]})
		}
	}
	for _, c := range body.Changes {
		f := c.File
		switch {
		case c.ChangeType != "" && c.ChangeType != "file":
			// A shared drive's own settings.
		case c.FileID == "":
			return practice.ChangesPage{}, upstream.Malformed(a.c.Label(), "changes", errors.New("a change without a fileId"))
		case c.Removed || f == nil || f.Trashed:
			page.Entries = append(page.Entries, docstore.FeedEntry[file]{ID: c.FileID, Gone: true})
		case f.MimeType == folderType:
			page.Entries = append(page.Entries, docstore.FeedEntry[file]{ID: c.FileID, Folder: true})
		default:
			e := docstore.FeedEntry[file]{ID: c.FileID, Item: *f, Gone: true}
			if len(f.Parents) > 0 {
				rel, ok, err := a.pathOf(ctx, f.Parents[0])
				if err != nil {
					return practice.ChangesPage{}, err
				}
				e.Rel, e.Located, e.Gone = rel, ok, !ok
			}
			page.Entries = append(page.Entries, e)
		}
	}
	return a.Feed(ctx, t, cursor, page)
}

// refusedToken says whether err is Drive refusing the pageToken (400
// Invalid Value at location pageToken), as it does one that expired.
func refusedToken(err error) bool {
	var s *practice.StatusError
	if !errors.As(err, &s) || s.Status != http.StatusBadRequest {
		return false
	}
	var body struct {
		Error struct {
			Errors []struct {
				Location string `json:"location"`
			} `json:"errors"`
		} `json:"error"`
	}
	if json.Unmarshal(s.Body, &body) != nil {
		return false
	}
	for _, e := range body.Error.Errors {
		if e.Location == "pageToken" {
			return true
		}
	}
	return false
}
