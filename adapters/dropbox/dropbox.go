// Package dropbox serves a firm's documents from Dropbox (API v2 files):
// metadata and a location pointer (file id, path, web URL), never file
// content.
//
// Documents are the files below a root folder, listed with
// files/list_folder recursive and files/list_folder/continue; Dropbox's
// own cursor continues a listing, so our cursor carries it. A single
// document is files/get_metadata of its id. A document's id is doc_ and
// the base64url of the Dropbox file id ("id:..."); created_at and
// filed_at are client_modified, updated_at server_modified (Dropbox keeps
// no creation time). Dropbox reports no content type: it is read from the
// file name.
package dropbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/docstore"
	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

// Config is one firm's Dropbox folder. Secrets may hold {env.X}
// placeholders, which the caller expands before New.
type Config struct {
	// Firm is the firm these records belong to (set by the wiring).
	Firm string `json:"firm,omitempty"`
	// Root is the folder documents are filed under, such as "/Clients"
	// [the whole Dropbox].
	Root string `json:"root,omitempty"`
	// PathRoot, when set, is sent as the Dropbox-API-Path-Root header,
	// for a team space: {".tag": "root", "root": "<namespace id>"}.
	PathRoot string `json:"path_root,omitempty"`
	// OAuth2 is the app key and secret with an offline refresh token
	// (scope files.metadata.read), or a fixed access_token. The token URL
	// defaults to https://api.dropboxapi.com/oauth2/token.
	OAuth2 upstream.OAuth2Config `json:"oauth2"`
	// BaseURL is the API [https://api.dropboxapi.com].
	BaseURL string `json:"base_url,omitempty"`
	// WebURL is where a file's web_url points, followed by its path
	// [https://www.dropbox.com/home].
	WebURL string `json:"web_url,omitempty"`
	// Filing is the firm's folder and file naming conventions.
	Filing filing.Config `json:"filing,omitzero"`
	// PageSize is list_folder's limit [500].
	PageSize int `json:"page_size,omitempty"`
	// MaxScanPages bounds the Dropbox pages one List reads [20].
	MaxScanPages int `json:"max_scan_pages,omitempty"`
	// Upstream is the resilience policy [600 requests a minute].
	Upstream upstream.Policy `json:"upstream,omitzero"`
	// AppSecret is the secret Dropbox signs the app's webhooks with
	// [the OAuth client_secret, which is the app secret]: set it when
	// the block gives a fixed access_token. Without either, the
	// system's webhook is not served and its changes are polled alone.
	AppSecret string `json:"app_secret,omitempty"`
}

// Adapter is one firm's Dropbox folder. It is safe for concurrent use;
// List and Get are its docstore.Store's.
type Adapter struct {
	*docstore.Store[metadata]
	cfg    Config
	c      *upstream.Client
	header http.Header

	// account is the firm's Dropbox account, once read; wake tells the
	// sync of a notification (notify.go).
	account atomic.Pointer[string]
	wake    func(context.Context) error
	log     *zap.Logger
	// paths are the files seen, by path (changes.go).
	paths filePaths
}

// New checks cfg and makes the adapter.
func New(cfg Config, deps upstream.Deps, opts ...docstore.Option) (*Adapter, error) {
	cfg.Root = strings.TrimSuffix("/"+strings.Trim(cfg.Root, "/"), "/")
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.dropboxapi.com"
	}
	if cfg.WebURL == "" {
		cfg.WebURL = "https://www.dropbox.com/home"
	}
	if cfg.PageSize <= 0 || cfg.PageSize > 2000 {
		cfg.PageSize = 500
	}
	if cfg.MaxScanPages <= 0 {
		cfg.MaxScanPages = 20
	}
	auth, err := oauthtoken.New(oauthtoken.Dropbox, cfg.OAuth2, "https://api.dropboxapi.com/oauth2/token", "body", deps)
	if err != nil {
		return nil, err
	}
	c, err := upstream.NewClient(upstream.Options{
		System: "dropbox", BaseURL: cfg.BaseURL, Policy: cfg.Upstream, Auth: auth,
		Defaults: upstream.Policy{RateLimit: 600, RatePeriod: upstream.Duration(time.Minute)},
		Account:  cfg.OAuth2.ClientID + cfg.OAuth2.AccessToken,
	}, deps)
	if err != nil {
		return nil, fmt.Errorf("dropbox: %w", err)
	}
	a := &Adapter{cfg: cfg, c: c, header: http.Header{}, wake: deps.Wake,
		log: deps.LoggerOrNop().With(zap.String("upstream", c.Label()))}
	if cfg.PathRoot != "" {
		a.header.Set("Dropbox-API-Path-Root", cfg.PathRoot)
	}
	a.Store, err = docstore.New(docstore.Source[metadata]{
		System: "dropbox", Provider: "dropbox", Firm: cfg.Firm, Label: c.Label(),
		Name:       func(m metadata) string { return "metadata " + m.ID },
		Fetch:      a.fetch,
		ID:         func(m metadata) string { return m.ID + m.PathLower },
		IsDocument: func(m metadata) bool { return m.Tag == "file" },
		// Dropbox keeps no creation time.
		Times:    func(m metadata) (string, string) { return m.ClientModified, m.ServerModified },
		Item:     a.item,
		Read:     a.read,
		MaxPages: cfg.MaxScanPages,
	}, cfg.Filing, append([]docstore.Option{docstore.WithStamps(
		stamps.New(deps.StateStore(), deps.ClockOrSystem(), "dropbox", cfg.Firm))}, opts...)...)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// metadata is Dropbox's FileMetadata / FolderMetadata / DeletedMetadata.
type metadata struct {
	Tag            string `json:".tag"`
	Name           string `json:"name"`
	ID             string `json:"id"`
	PathDisplay    string `json:"path_display"`
	PathLower      string `json:"path_lower"`
	ClientModified string `json:"client_modified"`
	ServerModified string `json:"server_modified"`
	Rev            string `json:"rev"`
	Size           int64  `json:"size"`
}

type listResult struct {
	Entries []metadata `json:"entries"`
	Cursor  string     `json:"cursor"`
	HasMore bool       `json:"has_more"`
}

// rpc makes one of Dropbox's RPC calls, all POSTs; reads may be retried.
func (a *Adapter) rpc(ctx context.Context, endpoint string, arg any, what string, out any) error {
	b, err := json.Marshal(arg)
	if err != nil {
		return fmt.Errorf("dropbox: encode %s: %w", what, err)
	}
	_, err = a.c.JSON(ctx, upstream.Request{Method: http.MethodPost, Path: endpoint, Body: b, Header: a.header, Idempotent: true}, what, out)
	return err
}

// fetch reads the first page of the recursive listing, or continues from a
// Dropbox cursor.
func (a *Adapter) fetch(ctx context.Context, _, token string) (paging.VendorPage[metadata], error) {
	var page paging.VendorPage[metadata]
	var res listResult
	var err error
	if token == "" {
		root := a.cfg.Root
		if root == "/" {
			root = ""
		}
		err = a.rpc(ctx, "/2/files/list_folder", map[string]any{
			"path": root, "recursive": true, "limit": a.cfg.PageSize, "include_deleted": false,
		}, "folder listing", &res)
	} else {
		err = a.rpc(ctx, "/2/files/list_folder/continue", map[string]string{"cursor": token}, "folder listing", &res)
		if isDropboxError(err, "reset") {
			// Dropbox retired the cursor; the caller starts over.
			return page, &practice.InvalidError{Code: "invalid_cursor", Param: "cursor",
				Message: "The document store restarted this listing; list again without a cursor."}
		}
	}
	if err != nil {
		return page, fmt.Errorf("dropbox: list folder: %w", err)
	}
	page.Items = res.Entries
	for _, m := range res.Entries {
		if m.Tag == "file" {
			a.paths.keep(m.PathLower, m.ID)
		}
	}
	if res.HasMore {
		if res.Cursor == "" {
			return page, upstream.Malformed(a.c.Label(), "folder listing", errors.New("has_more without a cursor"))
		}
		page.Next = res.Cursor
	}
	return page, nil
}

// read reads a file's metadata by its id ("id:...").
func (a *Adapter) read(ctx context.Context, fileID string) (metadata, string, error) {
	var m metadata
	if !strings.HasPrefix(fileID, "id:") {
		return m, "", fmt.Errorf("dropbox: no document %q: %w", fileID, practice.ErrNotFound)
	}
	err := a.rpc(ctx, "/2/files/get_metadata", map[string]string{"path": fileID}, "metadata", &m)
	if isDropboxError(err, "path/not_found") || isDropboxError(err, "path/malformed_path") {
		return m, "", fmt.Errorf("dropbox: no document %s: %w", fileID, practice.ErrNotFound)
	}
	if err != nil {
		return m, "", fmt.Errorf("dropbox: read %s: %w", fileID, err)
	}
	if m.Tag != "file" || !a.under(m.PathLower) {
		return m, "", fmt.Errorf("dropbox: %s is not a document under %s: %w", fileID, a.cfg.Root, practice.ErrNotFound)
	}
	a.paths.keep(m.PathLower, m.ID)
	return m, "", nil
}

func (a *Adapter) under(pathLower string) bool {
	root := strings.ToLower(a.cfg.Root)
	return root == "" || root == "/" || strings.HasPrefix(pathLower, root+"/")
}

// isDropboxError reports whether err is Dropbox's 409 endpoint error with
// an error_summary starting with prefix ("path/not_found/..").
func isDropboxError(err error, prefix string) bool {
	var s *practice.StatusError
	if !errors.As(err, &s) || s.Status != http.StatusConflict {
		return false
	}
	var body struct {
		Summary string `json:"error_summary"`
	}
	return json.Unmarshal(s.Body, &body) == nil && strings.HasPrefix(body.Summary, prefix)
}

// item reads where a file sits from its path_display, which keeps the
// case the folders were made with; the root is configured in any case, as
// Dropbox compares paths without it. The listing is flat, so rel is unused.
func (a *Adapter) item(m metadata, _ string) (filing.Item, error) {
	if m.PathDisplay == "" {
		return filing.Item{}, errors.New("no path")
	}
	dir := path.Dir(m.PathDisplay)
	root, rel := "/", dir
	if n := len(a.cfg.Root); n > 1 && len(dir) >= n && strings.EqualFold(dir[:n], a.cfg.Root) {
		root, rel = dir[:n], dir[n:]
	}
	return filing.Item{
		ID: m.ID, Name: m.Name, Size: m.Size, Root: root, Rel: rel,
		WebURL: a.cfg.WebURL + docstore.EscapePath(m.PathDisplay),
	}, nil
}

var _ practice.Reader = (*Adapter)(nil)

// Upstream is the adapter's resilient client, for readiness reports.
func (a *Adapter) Upstream() *upstream.Client { return a.c }
