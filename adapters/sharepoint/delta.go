package sharepoint

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"

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
	// A page that names a folder changed (renamed, moved, made or
	// deleted) may have moved the folders known: they are forgotten, and
	// its files read again.
	foldersChanged := false
	for _, it := range body.Value {
		foldersChanged = foldersChanged || it.Root == nil && (it.Folder != nil || it.Deleted != nil && it.File == nil)
	}
	if foldersChanged {
		a.folders.forget()
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
			e := docstore.FeedEntry[driveItem]{ID: it.ID}
			// A file in a folder known below the root is placed without
			// reading it again: delta gave all of it but its folder's path.
			if rel, ok := a.folders.path(it.ParentReference.ID); ok && !foldersChanged && it.File != nil {
				e.Item, e.Rel, e.Located = it, rel, true
			}
			page.Entries = append(page.Entries, e)
		}
	}
	return a.Feed(ctx, t, cursor, page)
}

// deltaFields are what the feed reads of an item: which it is and what
// kind, and what a document is made of but its folder's path (delta
// gives none).
const deltaFields = "id,name,size,webUrl,createdDateTime,lastModifiedDateTime,file,folder,root,deleted,parentReference"

// folderPaths are the paths below the filing root of the folders the
// adapter has seen, by their item id: what places a file the delta names.
type folderPaths struct {
	mu sync.Mutex
	m  map[string]string
}

// maxFolders bounds the folders kept.
const maxFolders = 100_000

func (f *folderPaths) path(id string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rel, ok := f.m[id]
	return rel, ok && id != ""
}

func (f *folderPaths) keep(id, rel string) {
	if id == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil || len(f.m) >= maxFolders {
		f.m = map[string]string{}
	}
	f.m[id] = rel
}

func (f *folderPaths) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m = nil
}

// learn keeps the folder an item read with its path sits in, and the
// item itself when it is a folder.
func (a *Adapter) learn(it driveItem) {
	rel, ok := a.relative(it.ParentReference.Path)
	if !ok {
		return
	}
	a.folders.keep(it.ParentReference.ID, rel)
	if it.Folder != nil {
		a.folders.keep(it.ID, path.Join(rel, it.Name))
	}
}
