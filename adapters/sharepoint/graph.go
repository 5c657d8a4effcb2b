// Package sharepoint serves a firm's documents from SharePoint or OneDrive
// through Microsoft Graph drive items: metadata and a location pointer
// (drive id, item id, web URL, folder path), never file content.
//
// Documents are the files under the filing root folder of one drive,
// walked depth first through each folder's children (Graph pages them
// with @odata.nextLink), their kind and client read from folder and file
// names by the filing package. A document's id is doc_ and the base64url
// of the drive item id; created_at and filed_at are createdDateTime,
// updated_at lastModifiedDateTime. Paging and updated_since are the
// docstore package's.
package sharepoint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync/atomic"
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

// Config is one firm's drive. Secrets may hold {env.X} placeholders, which
// the caller expands before New.
type Config struct {
	// Firm is the firm these records belong to (set by the wiring).
	Firm string `json:"firm,omitempty"`
	// Provider is the location's provider: sharepoint or onedrive
	// [sharepoint].
	Provider string `json:"provider,omitempty"`
	// DriveID is the document library or OneDrive (b!...). Without it
	// the drive is the one Graph names for SiteID or, for a OneDrive
	// connected by consent, the signed-in user's (GET /me/drive).
	DriveID string `json:"drive_id,omitempty"`
	// SiteID is a SharePoint site (contoso.sharepoint.com,<guid>,<guid>)
	// whose default document library is the drive (GET
	// /sites/{site_id}/drive), read when the drive is first used: what a
	// connection names, the site its administrator chose.
	SiteID string `json:"site_id,omitempty"`
	// Root is the folder path in the drive that documents are filed
	// under, such as "/Clients" [/].
	Root string `json:"root,omitempty"`
	// TenantID is the Microsoft Entra tenant, for the default token URL
	// https://login.microsoftonline.com/<tenant_id>/oauth2/v2.0/token.
	TenantID string `json:"tenant_id,omitempty"`
	// OAuth2 is the app registration's client credentials (application
	// permission Files.Read.All or Sites.Selected) or a fixed
	// access_token. Scopes default to https://graph.microsoft.com/.default.
	OAuth2 upstream.OAuth2Config `json:"oauth2"`
	// BaseURL is Microsoft Graph [https://graph.microsoft.com/v1.0].
	BaseURL string `json:"base_url,omitempty"`
	// Filing is the firm's folder and file naming conventions.
	Filing filing.Config `json:"filing,omitzero"`
	// PageSize is the $top of children pages [200].
	PageSize int `json:"page_size,omitempty"`
	// MaxScanPages bounds the Graph pages one List reads [20].
	MaxScanPages int `json:"max_scan_pages,omitempty"`
	// MaxDepth bounds how deep below the root folders are walked [6].
	MaxDepth int `json:"max_depth,omitempty"`
	// Upstream is the resilience policy [600 requests a minute].
	Upstream upstream.Policy `json:"upstream,omitzero"`
	// NotificationURL is where Graph sends the drive's change
	// notifications: the gateway's address for the system
	// (https://<gateway>/ingest/<firm>/sharepoint, or the connection's),
	// which the gateway fills in when it knows its public address. Empty:
	// no subscription is made, and the drive's changes are polled alone.
	NotificationURL string `json:"notification_url,omitempty"`
}

// Adapter is one firm's drive. It is safe for concurrent use; List and
// Get are its docstore.Store's.
type Adapter struct {
	*docstore.Store[driveItem]
	cfg Config
	c   *upstream.Client

	// resolving is held while the drive is read from Graph, so that one
	// request does (a channel, so that a caller waiting can give up);
	// drive is the drive's id once known, written under it.
	resolving chan struct{}
	drive     atomic.Pointer[string]

	// keeper keeps the drive's change notification subscription
	// (notify.go); wake tells the sync of a notification.
	keeper *subscription.Keeper
	wake   func(context.Context) error
	log    *zap.Logger
	// folders are the folders seen below the root (delta.go).
	folders folderPaths
}

// New checks cfg and makes the adapter.
func New(cfg Config, deps upstream.Deps, opts ...docstore.Option) (*Adapter, error) {
	if cfg.Provider == "" {
		cfg.Provider = "sharepoint"
	}
	if cfg.Provider != "sharepoint" && cfg.Provider != "onedrive" {
		return nil, fmt.Errorf("graph: provider %q must be sharepoint or onedrive", cfg.Provider)
	}
	if cfg.DriveID != "" && cfg.SiteID != "" {
		return nil, fmt.Errorf("graph: drive_id and site_id name the drive twice; give one")
	}
	if cfg.DriveID == "" && cfg.SiteID == "" && (cfg.Provider != "onedrive" || !cfg.OAuth2.RefreshGrant()) {
		// Only a user's grant has a /me: an app's own token (client
		// credentials) names the drive.
		return nil, fmt.Errorf("graph: drive_id or site_id is required")
	}
	cfg.Root = path.Clean("/" + cfg.Root)
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://graph.microsoft.com/v1.0"
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 200
	}
	if cfg.MaxScanPages <= 0 {
		cfg.MaxScanPages = 20
	}
	if cfg.MaxDepth <= 0 {
		cfg.MaxDepth = 6
	}
	if len(cfg.OAuth2.Scopes) == 0 && !cfg.OAuth2.RefreshGrant() {
		cfg.OAuth2.Scopes = []string{"https://graph.microsoft.com/.default"}
	}
	tokenURL := ""
	if cfg.TenantID != "" {
		tokenURL = "https://login.microsoftonline.com/" + url.PathEscape(cfg.TenantID) + "/oauth2/v2.0/token"
	}
	auth, err := oauthtoken.New(oauthtoken.Graph, cfg.OAuth2, tokenURL, "body", deps)
	if err != nil {
		return nil, err
	}
	c, err := upstream.NewClient(upstream.Options{
		System: "graph", BaseURL: cfg.BaseURL, Policy: cfg.Upstream, Auth: auth,
		Defaults: upstream.Policy{RateLimit: 600, RatePeriod: upstream.Duration(time.Minute)},
		Account:  cmp.Or(cfg.DriveID, cfg.SiteID, cfg.OAuth2.Connection),
	}, deps)
	if err != nil {
		return nil, fmt.Errorf("graph: %w", err)
	}
	a := &Adapter{cfg: cfg, c: c, resolving: make(chan struct{}, 1), wake: deps.Wake,
		log: deps.LoggerOrNop().With(zap.String("upstream", c.Label()))}
	a.keeper = &subscription.Keeper{State: deps.StateStore(),
		Key:     "subscription/graph/" + cfg.Firm + "/" + cmp.Or(cfg.DriveID, cfg.SiteID, cfg.OAuth2.Connection, "me"),
		Address: cfg.NotificationURL, Life: subscriptionLife, Renew: subscriptionRenew, Check: subscriptionCheck,
		Vendor: graphVendor{a}, Clock: deps.ClockOrSystem()}
	if cfg.DriveID != "" {
		a.drive.Store(&cfg.DriveID)
	}
	a.Store, err = docstore.New(docstore.Source[driveItem]{
		System: "graph", Provider: cfg.Provider, Firm: cfg.Firm, Label: c.Label(),
		Name:  func(it driveItem) string { return "drive item " + it.ID },
		Fetch: a.fetchChildren,
		ID:    func(it driveItem) string { return it.ID },
		Descend: func(it driveItem) (string, string, bool) {
			return it.ID, it.Name, it.Folder != nil
		},
		IsDocument: func(it driveItem) bool { return it.File != nil },
		Times: func(it driveItem) (string, string) {
			return it.CreatedDateTime, it.LastModifiedDateTime
		},
		Item:     a.item,
		Read:     a.read,
		Folder:   a.folder,
		MaxPages: cfg.MaxScanPages,
		MaxDepth: cfg.MaxDepth,
	}, cfg.Filing, append([]docstore.Option{docstore.WithStamps(
		stamps.New(deps.StateStore(), deps.ClockOrSystem(), "sharepoint", cfg.Firm))}, opts...)...)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// driveItem is Graph's driveItem, the fields we read.
type driveItem struct {
	ID                   string `json:"id"`
	Name                 string `json:"name"`
	Size                 int64  `json:"size"`
	WebURL               string `json:"webUrl"`
	CreatedDateTime      string `json:"createdDateTime"`
	LastModifiedDateTime string `json:"lastModifiedDateTime"`
	File                 *struct {
		MimeType string `json:"mimeType"`
	} `json:"file"`
	Folder *struct {
		ChildCount int `json:"childCount"`
	} `json:"folder"`
	// Root and Deleted are facets: the drive's root folder, and an item
	// the delta feed reports deleted.
	Root            *struct{} `json:"root"`
	Deleted         *struct{} `json:"deleted"`
	ParentReference struct {
		DriveID string `json:"driveId"`
		ID      string `json:"id"`
		Path    string `json:"path"`
	} `json:"parentReference"`
}

type children struct {
	Value    []driveItem `json:"value"`
	NextLink string      `json:"@odata.nextLink"`
}

const selectFields = "id,name,size,webUrl,createdDateTime,lastModifiedDateTime,file,folder,parentReference"

// fetchChildren reads a page of a folder's children: the root folder's
// by path, others by item id, later pages by the next link.
func (a *Adapter) fetchChildren(ctx context.Context, folder, token string) (paging.VendorPage[driveItem], error) {
	var page paging.VendorPage[driveItem]
	req := upstream.Request{Path: token}
	if token == "" {
		id, err := a.driveID(ctx)
		if err != nil {
			return page, err
		}
		drive := "/drives/" + url.PathEscape(id)
		switch {
		case folder != "":
			req.Path = drive + "/items/" + url.PathEscape(folder) + "/children"
		case a.cfg.Root == "/":
			req.Path = drive + "/root/children"
		default:
			req.Path = drive + "/root:" + docstore.EscapePath(a.cfg.Root) + ":/children"
		}
		req.Query = url.Values{"$top": {strconv.Itoa(a.cfg.PageSize)}, "$select": {selectFields}}
	} else if !strings.HasPrefix(token, "/drives/") {
		return page, &practice.InvalidError{Code: "invalid_cursor", Param: "cursor",
			Message: "The cursor is not one this collection issued; pass the next_cursor of the previous page."}
	}
	var body children
	if _, err := a.c.JSON(ctx, req, "children", &body); err != nil {
		return page, fmt.Errorf("graph: list folder: %w", err)
	}
	page.Items = body.Value
	for _, it := range body.Value {
		a.learn(it)
	}
	if body.NextLink != "" {
		rel, err := a.c.Relative(body.NextLink)
		if err != nil {
			return page, err
		}
		page.Next = rel
	}
	return page, nil
}

// read reads a drive item and its folder below the filing root.
func (a *Adapter) read(ctx context.Context, itemID string) (driveItem, string, error) {
	var it driveItem
	drive, err := a.driveID(ctx)
	if err != nil {
		return it, "", err
	}
	req := upstream.Request{
		Path:  "/drives/" + url.PathEscape(drive) + "/items/" + url.PathEscape(itemID),
		Query: url.Values{"$select": {selectFields}},
	}
	if _, err := a.c.JSON(ctx, req, "drive item", &it); err != nil {
		return it, "", fmt.Errorf("graph: read item: %w", err)
	}
	rel, ok := a.relative(it.ParentReference.Path)
	if it.File == nil || !ok {
		return it, "", fmt.Errorf("graph: %s is not a document under %s: %w", itemID, a.cfg.Root, practice.ErrNotFound)
	}
	a.learn(it)
	return it, rel, nil
}

// relative turns a parent path ("/drive/root:/Clients/Acme" or
// "/drives/<id>/root:/Clients/Acme") into the path below the filing root.
func (a *Adapter) relative(parent string) (string, bool) {
	_, p, ok := strings.Cut(parent, "root:")
	if !ok {
		return "", false
	}
	p, err := url.PathUnescape(p)
	if err != nil {
		return "", false
	}
	p = path.Clean("/" + p)
	if a.cfg.Root == "/" {
		return p, true
	}
	if p == a.cfg.Root {
		return "/", true
	}
	rel, ok := strings.CutPrefix(p, a.cfg.Root+"/")
	return "/" + rel, ok
}

// folder says where a folder sits below the filing root.
func (a *Adapter) folder(ctx context.Context, id string) (string, bool, error) {
	var it driveItem
	drive, err := a.driveID(ctx)
	if err != nil {
		return "", false, err
	}
	req := upstream.Request{
		Path:  "/drives/" + url.PathEscape(drive) + "/items/" + url.PathEscape(id),
		Query: url.Values{"$select": {selectFields}},
	}
	if _, err := a.c.JSON(ctx, req, "drive item", &it); errors.Is(err, practice.ErrNotFound) {
		return "", false, nil
	} else if err != nil {
		return "", false, fmt.Errorf("graph: read folder: %w", err)
	}
	parent, ok := a.relative(it.ParentReference.Path)
	if it.Folder == nil || it.Root != nil || !ok {
		return "", false, nil
	}
	return path.Join(parent, it.Name), true, nil
}

// item is what the filing conventions read of a drive item in folder rel.
func (a *Adapter) item(it driveItem, rel string) (filing.Item, error) {
	drive := it.ParentReference.DriveID
	if drive == "" {
		// Items are read after the drive is known.
		if known := a.drive.Load(); known != nil {
			drive = *known
		}
	}
	return filing.Item{
		ID: it.ID, Name: it.Name, MimeType: it.File.MimeType, Size: it.Size,
		Root: a.cfg.Root, Rel: rel, DriveID: drive, WebURL: it.WebURL,
	}, nil
}

var _ practice.Reader = (*Adapter)(nil)

// Upstream is the adapter's resilient client, for readiness reports.
func (a *Adapter) Upstream() *upstream.Client { return a.c }

// driveID is the drive's id: the configured drive_id, or else the one
// Graph names for the site (GET /sites/{site}/drive) or for the signed-in
// user (GET /me/drive), read on first use and kept for the adapter's
// life. A firm's connection names the site, not the drive: the site is
// what its administrator chose, a connection made before the drive was
// read names nothing else, and the library followed is the site's default
// one when the firm's system opens. A failed read is not kept: the next
// use asks again.
func (a *Adapter) driveID(ctx context.Context) (string, error) {
	if id := a.drive.Load(); id != nil {
		return *id, nil
	}
	select {
	case a.resolving <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-a.resolving }()
	if id := a.drive.Load(); id != nil {
		return *id, nil
	}
	path, what := "/me/drive", "the signed-in user's drive"
	if a.cfg.SiteID != "" {
		path, what = "/sites/"+url.PathEscape(a.cfg.SiteID)+"/drive", "the site's document library"
	}
	var drive struct {
		ID string `json:"id"`
	}
	_, err := a.c.JSON(ctx, upstream.Request{Path: path, Query: url.Values{"$select": {"id"}}}, "drive", &drive)
	if errors.Is(err, practice.ErrNotFound) {
		// The site is gone or has no library: the firm's configuration
		// fails, not a document the caller named.
		return "", fmt.Errorf("%w: graph: no %s (%s): %v", practice.ErrBadUpstream, what, a.c.Label(), err)
	}
	if err != nil {
		return "", fmt.Errorf("graph: %s: %w", what, err)
	}
	if drive.ID == "" {
		return "", upstream.Malformed(a.c.Label(), "drive", errors.New("a drive without id"))
	}
	a.drive.Store(&drive.ID)
	return drive.ID, nil
}
