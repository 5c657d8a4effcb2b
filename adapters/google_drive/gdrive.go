// Package googledrive serves a firm's documents from Google Drive files
// (Drive API v3): metadata and a location pointer (drive id, file id,
// webViewLink, folder path), never file content.
//
// Drive has no paths, only parent folder ids, so documents are the files
// below a root folder, walked depth first with files.list and
// "'<folder>' in parents" (paged with nextPageToken); the folder names on
// the way make the path. A single document's path is found by walking its
// parents up to the root; a file outside the root is not a document of
// this firm. A document's id is doc_ and the base64url of the file id;
// created_at and filed_at are createdTime, updated_at modifiedTime.
// Google Docs, Sheets and the like have no size and read as 0 bytes.
package googledrive

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/docstore"
	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/subscription"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

const folderType = "application/vnd.google-apps.folder"

// Config is one firm's Drive folder. Secrets may hold {env.X}
// placeholders, which the caller expands before New.
type Config struct {
	// Firm is the firm these records belong to (set by the wiring).
	Firm string `json:"firm,omitempty"`
	// DriveID is the shared drive, empty for My Drive.
	DriveID string `json:"drive_id,omitempty"`
	// RootFolderID is the folder documents are filed under [the shared
	// drive's root, or "root" for My Drive].
	RootFolderID string `json:"root_folder_id,omitempty"`
	// RootPath is how the root folder is written in locations, such as
	// "/Clients" [/].
	RootPath string `json:"root_path,omitempty"`
	// OAuth2 is an OAuth client's id, secret and refresh token (scope
	// drive.metadata.readonly), or a fixed access_token. The token URL
	// defaults to https://oauth2.googleapis.com/token.
	OAuth2 upstream.OAuth2Config `json:"oauth2"`
	// BaseURL is the Drive API [https://www.googleapis.com/drive/v3].
	BaseURL string `json:"base_url,omitempty"`
	// Filing is the firm's folder and file naming conventions.
	Filing filing.Config `json:"filing,omitzero"`
	// PageSize is files.list's pageSize [200, at most 1000].
	PageSize int `json:"page_size,omitempty"`
	// MaxScanPages bounds the Drive pages one List reads [20].
	MaxScanPages int `json:"max_scan_pages,omitempty"`
	// MaxDepth bounds how deep below the root folders are walked [6].
	MaxDepth int `json:"max_depth,omitempty"`
	// Upstream is the resilience policy [600 requests a minute].
	Upstream upstream.Policy `json:"upstream,omitzero"`
	// NotificationURL is where Drive sends the changes feed's push
	// messages: the gateway's address for the system, which the gateway
	// fills in when it knows its public address. Empty: no channel is
	// made, and the changes are polled alone.
	NotificationURL string `json:"notification_url,omitempty"`
}

// Adapter is one firm's Drive folder. It is safe for concurrent use; List
// and Get are its docstore.Store's.
type Adapter struct {
	*docstore.Store[file]
	cfg     Config
	c       *upstream.Client
	folders folderCache

	// keeper keeps the changes feed's push channel (notify.go); wake
	// tells the sync of a notification.
	keeper *subscription.Keeper
	wake   func(context.Context) error
	log    *zap.Logger
}

// New checks cfg and makes the adapter.
func New(cfg Config, deps upstream.Deps, opts ...docstore.Option) (*Adapter, error) {
	if cfg.RootFolderID == "" {
		cfg.RootFolderID = "root"
		if cfg.DriveID != "" {
			cfg.RootFolderID = cfg.DriveID
		}
	}
	cfg.RootPath = "/" + strings.Trim(cfg.RootPath, "/")
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://www.googleapis.com/drive/v3"
	}
	if cfg.PageSize <= 0 || cfg.PageSize > 1000 {
		cfg.PageSize = 200
	}
	if cfg.MaxScanPages <= 0 {
		cfg.MaxScanPages = 20
	}
	if cfg.MaxDepth <= 0 {
		cfg.MaxDepth = 6
	}
	auth, err := oauthtoken.New(oauthtoken.GDrive, cfg.OAuth2, "https://oauth2.googleapis.com/token", "body", deps)
	if err != nil {
		return nil, err
	}
	c, err := upstream.NewClient(upstream.Options{
		System: "gdrive", BaseURL: cfg.BaseURL, Policy: cfg.Upstream, Auth: auth,
		Defaults: upstream.Policy{RateLimit: 600, RatePeriod: upstream.Duration(time.Minute)},
		Account:  cfg.OAuth2.ClientID + cfg.OAuth2.AccessToken,
	}, deps)
	if err != nil {
		return nil, fmt.Errorf("gdrive: %w", err)
	}
	a := &Adapter{cfg: cfg, c: c, folders: folderCache{m: map[string]folderInfo{}}, wake: deps.Wake,
		log: deps.LoggerOrNop().With(zap.String("upstream", c.Label()))}
	account := cfg.DriveID
	if account == "" {
		account = cfg.OAuth2.Connection + cfg.OAuth2.ClientID
	}
	a.keeper = &subscription.Keeper{State: deps.StateStore(), Key: "subscription/gdrive/" + cfg.Firm + "/" + account,
		Address: cfg.NotificationURL, Life: channelLife, Renew: channelReplace, Vendor: driveVendor{a}, Clock: deps.ClockOrSystem()}
	a.Store, err = docstore.New(docstore.Source[file]{
		System: "gdrive", Provider: "google_drive", Firm: cfg.Firm, Label: c.Label(),
		Name:  func(f file) string { return "file " + f.ID },
		Fetch: a.fetchFolder,
		ID:    func(f file) string { return f.ID },
		Descend: func(f file) (string, string, bool) {
			return f.ID, f.Name, f.MimeType == folderType
		},
		IsDocument: isDocument,
		Times:      func(f file) (string, string) { return f.CreatedTime, f.ModifiedTime },
		Item:       a.item,
		Read:       a.read,
		Folder:     a.pathOf,
		MaxPages:   cfg.MaxScanPages,
		MaxDepth:   cfg.MaxDepth,
	}, cfg.Filing, append([]docstore.Option{docstore.WithStamps(
		stamps.New(deps.StateStore(), deps.ClockOrSystem(), "gdrive", cfg.Firm))}, opts...)...)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// file is Drive's File resource, the fields we read. Drive writes int64
// fields such as size as strings.
type file struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	MimeType     string   `json:"mimeType"`
	Size         string   `json:"size"`
	CreatedTime  string   `json:"createdTime"`
	ModifiedTime string   `json:"modifiedTime"`
	WebViewLink  string   `json:"webViewLink"`
	Parents      []string `json:"parents"`
	DriveID      string   `json:"driveId"`
	Trashed      bool     `json:"trashed"`
}

const fileFields = "id,name,mimeType,size,createdTime,modifiedTime,webViewLink,parents,driveId,trashed"

// isDocument says whether a file is one of the firm's documents.
func isDocument(f file) bool { return f.MimeType != folderType && !f.Trashed }

// query adds the shared-drive parameters Drive needs to see a shared
// drive's files.
func (a *Adapter) query(q url.Values) url.Values {
	if a.cfg.DriveID != "" {
		q.Set("supportsAllDrives", "true")
		q.Set("includeItemsFromAllDrives", "true")
		q.Set("corpora", "drive")
		q.Set("driveId", a.cfg.DriveID)
	}
	return q
}

// fetchFolder reads a page of a folder's children; the token is Drive's
// nextPageToken.
func (a *Adapter) fetchFolder(ctx context.Context, folder, token string) (paging.VendorPage[file], error) {
	var page paging.VendorPage[file]
	if folder == "" {
		folder = a.cfg.RootFolderID
	}
	q := a.query(url.Values{
		"q":        {"'" + strings.ReplaceAll(folder, "'", `\'`) + "' in parents and trashed = false"},
		"pageSize": {strconv.Itoa(a.cfg.PageSize)},
		"fields":   {"nextPageToken,files(" + fileFields + ")"},
		"orderBy":  {"folder,name"},
	})
	if token != "" {
		q.Set("pageToken", token)
	}
	var body struct {
		Files         []file `json:"files"`
		NextPageToken string `json:"nextPageToken"`
	}
	if _, err := a.c.JSON(ctx, upstream.Request{Path: "/files", Query: q}, "files", &body); err != nil {
		return page, fmt.Errorf("gdrive: list folder: %w", err)
	}
	for _, f := range body.Files {
		if f.MimeType == folderType {
			a.folders.put(f.ID, folderInfo{name: f.Name, parent: folder})
		}
	}
	page.Items, page.Next = body.Files, body.NextPageToken
	return page, nil
}

// read reads a file and its folder below the root folder.
func (a *Adapter) read(ctx context.Context, fileID string) (file, string, error) {
	f, err := a.readFile(ctx, fileID)
	if err != nil {
		return f, "", err
	}
	if !isDocument(f) || len(f.Parents) == 0 {
		return f, "", fmt.Errorf("gdrive: %s is not a document: %w", fileID, practice.ErrNotFound)
	}
	rel, ok, err := a.pathOf(ctx, f.Parents[0])
	if err != nil {
		return f, "", err
	}
	if !ok {
		return f, "", fmt.Errorf("gdrive: %s is not under the filing root: %w", fileID, practice.ErrNotFound)
	}
	return f, rel, nil
}

func (a *Adapter) readFile(ctx context.Context, id string) (file, error) {
	var f file
	q := a.query(url.Values{"fields": {fileFields}})
	q.Del("corpora")
	q.Del("driveId")
	q.Del("includeItemsFromAllDrives")
	if _, err := a.c.JSON(ctx, upstream.Request{Path: "/files/" + url.PathEscape(id), Query: q}, "file", &f); err != nil {
		return f, fmt.Errorf("gdrive: read file %s: %w", id, err)
	}
	return f, nil
}

// pathOf is a folder's path below the root, walking up its parents; ok is
// false when the walk does not reach the root.
func (a *Adapter) pathOf(ctx context.Context, folder string) (string, bool, error) {
	var names []string
	for range a.cfg.MaxDepth + 1 {
		if folder == a.cfg.RootFolderID {
			rel := ""
			for i := len(names) - 1; i >= 0; i-- {
				rel += "/" + names[i]
			}
			return rel, true, nil
		}
		info, ok := a.folders.get(folder)
		if !ok {
			f, err := a.readFile(ctx, folder)
			if errors.Is(err, practice.ErrNotFound) {
				// Deleted on the way: nothing below it is a document.
				return "", false, nil
			}
			if err != nil {
				return "", false, err
			}
			if len(f.Parents) == 0 {
				return "", false, nil
			}
			info = folderInfo{name: f.Name, parent: f.Parents[0]}
			a.folders.put(folder, info)
		}
		names = append(names, info.name)
		folder = info.parent
	}
	return "", false, nil
}

// item is what the filing conventions read of a file in folder rel.
// Google Docs, Sheets and the like have no size.
func (a *Adapter) item(f file, rel string) (filing.Item, error) {
	var size int64
	if f.Size != "" {
		var err error
		if size, err = strconv.ParseInt(f.Size, 10, 64); err != nil {
			return filing.Item{}, err
		}
	}
	return filing.Item{
		ID: f.ID, Name: f.Name, MimeType: f.MimeType, Size: size,
		Root: a.cfg.RootPath, Rel: rel, DriveID: f.DriveID, WebURL: f.WebViewLink,
	}, nil
}

// folderCache remembers folder names and parents seen while listing, so
// a document's path costs no reads when its folders were listed before.
// Folders are renamed rarely; a stale name only shows in a path.
type folderCache struct {
	mu sync.Mutex
	m  map[string]folderInfo
}

type folderInfo struct{ name, parent string }

func (c *folderCache) get(id string) (folderInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.m[id]
	return f, ok
}

func (c *folderCache) put(id string, f folderInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= 50000 {
		c.m = map[string]folderInfo{}
	}
	c.m[id] = f
}

var _ practice.Reader = (*Adapter)(nil)

// Upstream is the adapter's resilient client, for readiness reports.
func (a *Adapter) Upstream() *upstream.Client { return a.c }
