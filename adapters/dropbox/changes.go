package dropbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/practicegw/practicegw/adapters/kit/docstore"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// Changes reads Dropbox's changes below the root folder: from the present
// when cursor is "" (list_folder/get_latest_cursor, recursive), else one
// page of list_folder/continue after cursor. Dropbox names a changed file
// with its metadata, and everything below a moved folder at its new path,
// but a deleted or moved-away item only by its old path: the file last
// there is found with list_revisions and read again by its id, which
// tells a file moved within the root from one gone. A removed folder's
// files are named by nothing, so it ends the feed with
// practice.ErrFeedExpired, as does a cursor Dropbox has reset.
func (a *Adapter) Changes(ctx context.Context, t practice.Tenant, cursor string) (practice.ChangesPage, error) {
	if err := a.Serves(t); err != nil {
		return practice.ChangesPage{}, err
	}
	if cursor == "" {
		var res struct {
			Cursor string `json:"cursor"`
		}
		err := a.rpc(ctx, "/2/files/list_folder/get_latest_cursor", map[string]any{
			"path": a.cfg.Root, "recursive": true, "limit": a.cfg.PageSize, "include_deleted": false,
		}, "latest cursor", &res)
		if err != nil {
			return practice.ChangesPage{}, fmt.Errorf("dropbox: start changes: %w", err)
		}
		return a.Feed(ctx, t, cursor, docstore.FeedPage[metadata]{Next: res.Cursor})
	}
	var res listResult
	err := a.rpc(ctx, "/2/files/list_folder/continue", map[string]string{"cursor": cursor}, "folder changes", &res)
	if isDropboxError(err, "reset") {
		return practice.ChangesPage{}, fmt.Errorf("dropbox: changes: %v: %w", err, practice.ErrFeedExpired)
	}
	if err != nil {
		return practice.ChangesPage{}, fmt.Errorf("dropbox: changes: %w", err)
	}
	page := docstore.FeedPage[metadata]{Next: res.Cursor, More: res.HasMore}
	for _, m := range res.Entries {
		switch m.Tag {
		case "file":
			if m.ID == "" {
				return practice.ChangesPage{}, upstream.Malformed(a.c.Label(), "folder changes", errors.New("a file without an id"))
			}
			page.Entries = append(page.Entries, docstore.FeedEntry[metadata]{ID: m.ID, Item: m, Located: a.under(m.PathLower), Gone: !a.under(m.PathLower)})
		case "deleted":
			if !a.under(m.PathLower) {
				continue
			}
			id, err := a.lastFileAt(ctx, m.PathLower)
			if err != nil {
				return practice.ChangesPage{}, err
			}
			page.Entries = append(page.Entries, docstore.FeedEntry[metadata]{ID: id})
		}
	}
	return a.Feed(ctx, t, cursor, page)
}

// lastFileAt is the id of the file last at a path, from list_revisions.
// A path that held no file held a folder.
func (a *Adapter) lastFileAt(ctx context.Context, pathLower string) (string, error) {
	var res struct {
		Entries []metadata `json:"entries"`
	}
	err := a.rpc(ctx, "/2/files/list_revisions", map[string]any{"path": pathLower, "mode": "path", "limit": 1}, "revisions", &res)
	if isDropboxError(err, "path/") || err == nil && (len(res.Entries) == 0 || res.Entries[0].ID == "") {
		return "", fmt.Errorf("dropbox: changes: the folder %s was removed and Dropbox names none of its files: %w", pathLower, practice.ErrFeedExpired)
	}
	if err != nil {
		return "", fmt.Errorf("dropbox: revisions of %s: %w", pathLower, err)
	}
	return res.Entries[0].ID, nil
}
