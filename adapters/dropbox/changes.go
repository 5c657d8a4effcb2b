package dropbox

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/practicegw/practicegw/adapters/kit/docstore"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// Changes reads Dropbox's changes below the root folder: from the present
// when cursor is "" (list_folder/get_latest_cursor, recursive), else one
// page of list_folder/continue after cursor. Dropbox names a changed file
// with its metadata, and everything below a moved folder at its new path,
// but a deleted or moved-away item only by its old path: the file last
// there is the one the adapter saw there (else list_revisions says), and
// one the same answer does not name at its new path is gone. A removed folder's
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
	named := map[string]bool{}
	for _, m := range res.Entries {
		if m.Tag == "file" {
			named[m.ID] = true
		}
	}
	for _, m := range res.Entries {
		switch m.Tag {
		case "file":
			if m.ID == "" {
				return practice.ChangesPage{}, upstream.Malformed(a.c.Label(), "folder changes", errors.New("a file without an id"))
			}
			a.paths.keep(m.PathLower, m.ID)
			page.Entries = append(page.Entries, docstore.FeedEntry[metadata]{ID: m.ID, Item: m, Located: a.under(m.PathLower), Gone: !a.under(m.PathLower)})
		case "deleted":
			if !a.under(m.PathLower) {
				continue
			}
			id, ok := a.paths.id(m.PathLower)
			if !ok {
				var err error
				if id, err = a.lastFileAt(ctx, m.PathLower); err != nil {
					return practice.ChangesPage{}, err
				}
			}
			a.paths.drop(m.PathLower)
			if named[id] {
				continue // moved: the page names it where it is now
			}
			// Dropbox names a file moved at its new path in the same
			// answer as its old one: one it names nowhere else is gone.
			page.Entries = append(page.Entries, docstore.FeedEntry[metadata]{ID: id, Gone: true})
		}
	}
	return a.Feed(ctx, t, cursor, page)
}

// filePaths are the ids of the files the adapter has seen, by their
// lowercased path: Dropbox names a deleted file by its path alone.
type filePaths struct {
	mu sync.Mutex
	m  map[string]string
}

// maxPaths bounds the paths kept; past it the oldest knowledge goes and
// list_revisions is asked.
const maxPaths = 200_000

func (f *filePaths) keep(pathLower, id string) {
	if pathLower == "" || id == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil || len(f.m) >= maxPaths {
		f.m = map[string]string{}
	}
	f.m[pathLower] = id
}

func (f *filePaths) id(pathLower string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.m[pathLower]
	return id, ok
}

func (f *filePaths) drop(pathLower string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, pathLower)
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
