// Package docstore is the reading the document-store adapters (graph,
// gdrive, dropbox) share: which tenants a firm's store serves, the walk of
// its folders into pages of documents with updated_since applied, reading
// one document by its doc_ id, and turning a store's item into the /v1
// document by the firm's filing conventions; and turning a page of a
// store's change feed into the documents changed and gone (feed.go). A
// store's own package keeps what is the store's: its configuration, auth
// and wire shapes, how it lists a folder, reads one item and reads its
// change feed, and where an item sits.
package docstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/stamps"
)

// Source is how one store is read, over the store's item type T.
type Source[T any] struct {
	// System names the store in errors ("graph").
	System string
	// Provider is the documents' location provider ("sharepoint").
	Provider string
	// Firm is the firm the documents belong to; empty serves every live
	// tenant.
	Firm string
	// Label is the store's upstream label, which names it in unreadable
	// answers (upstream.Client.Label).
	Label string
	// Name names an item in unreadable answers ("drive item 01ABC").
	Name func(T) string

	// Fetch, ID and Descend walk the store as paging.Walk's do; a nil
	// Descend lists flat, for a store that lists a folder recursively.
	Fetch   func(ctx context.Context, folder, token string) (paging.VendorPage[T], error)
	ID      func(T) string
	Descend func(T) (folder, name string, ok bool)
	// IsDocument says whether a listed item that is not a folder is a
	// document: a file, not one in the trash.
	IsDocument func(T) bool
	// Times are an item's creation and last modification times as the
	// store writes them (RFC 3339). The last is what updated_since
	// compares, since a folder's own modified time says nothing of the
	// files below it.
	Times func(T) (created, modified string)
	// Item is what the filing conventions read of a document, all but its
	// times; rel is the folder below the root that the walk or Read found
	// it in ("" from a flat listing). An error is an item the store should
	// not have sent.
	Item func(it T, rel string) (filing.Item, error)
	// Read reads one item by its store id, with its folder below the
	// root; an item that is not a document under the root is
	// practice.ErrNotFound.
	Read func(ctx context.Context, itemID string) (it T, rel string, err error)
	// Folder says where a folder the change feed named sits: its path
	// below the root, ok false when it is not below the root. Nil for a
	// store whose feed names every item below a changed folder itself.
	Folder func(ctx context.Context, folderID string) (rel string, ok bool, err error)

	// MaxPages bounds the store's pages one List reads, MaxDepth how deep
	// below the root it walks (paging.Walk's).
	MaxPages, MaxDepth int
}

// Option changes New.
type Option func(*options)

type options struct {
	clients linking.Linker
	stamps  *stamps.Store
}

// WithClientLinker links client folders to the practice's clients (the
// firm's records system, by linking's rule); the store's stamps move a
// document's version when its link changes (WithStamps).
func WithClientLinker(l linking.Linker) Option {
	return func(o *options) { o.clients = l }
}

// WithStamps moves a document's version when what /v1 shows of it
// changes under the same modification time: its path, when a folder
// above it is renamed or moved (the stores date the folder, not the files
// in it), and its client, linked from the records system.
func WithStamps(st *stamps.Store) Option {
	return func(o *options) { o.stamps = st }
}

// Store serves a firm's documents from a Source. It is safe for
// concurrent use when the Source's functions are.
type Store[T any] struct {
	src    Source[T]
	filing *filing.Classifier
	stamps *stamps.Store
}

// New checks the firm's filing conventions and makes the store.
func New[T any](src Source[T], conventions filing.Config, opts ...Option) (*Store[T], error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	c, err := filing.New(conventions, o.clients)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.System, err)
	}
	return &Store[T]{src: src, filing: c, stamps: o.stamps}, nil
}

func (s *Store[T]) serves(t practice.Tenant) bool {
	return !t.Sandbox && (s.src.Firm == "" || t.Firm == s.src.Firm)
}

// List returns a page of documents; other kinds are empty.
func (s *Store[T]) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	if !s.serves(t) {
		return practice.Page{}, fmt.Errorf("%s: no records for %s: %w", s.src.System, t, practice.ErrNotFound)
	}
	cur, err := paging.DecodeCursor(q.Cursor)
	if err != nil {
		return practice.Page{}, err
	}
	if k != practice.Documents {
		return practice.Page{Items: []json.RawMessage{}}, nil
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	since := q.Filter.UpdatedSince
	w := paging.Walk[T]{
		Fetch:   s.src.Fetch,
		ID:      s.src.ID,
		Descend: s.src.Descend,
		Match: func(it T) bool {
			if !s.src.IsDocument(it) {
				return false
			}
			_, modified := s.src.Times(it)
			m, err := time.Parse(time.RFC3339Nano, modified)
			return since.IsZero() || err == nil && !m.Before(since)
		},
		Convert: func(ctx context.Context, found []paging.Found[T]) ([]json.RawMessage, error) {
			return paging.Each(ctx, 1, len(found), func(ctx context.Context, i int) (json.RawMessage, error) {
				raw, err := s.document(ctx, t, found[i].Item, found[i].Path)
				if id := s.src.ID(found[i].Item); err != nil && id != "" {
					// A file that cannot be read is its document's alone.
					return nil, practice.Unusable(practice.Documents, filing.DocID(id), "the file", err)
				}
				return raw, err
			})
		},
		MaxPages: s.src.MaxPages,
		MaxDepth: s.src.MaxDepth,
	}
	return w.Collect(ctx, paging.Frame{}, cur, limit)
}

// Get returns one document: a file under the filing root.
func (s *Store[T]) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	if !s.serves(t) {
		return nil, fmt.Errorf("%s: no records for %s: %w", s.src.System, t, practice.ErrNotFound)
	}
	itemID, ok := filing.ParseDocID(id)
	if k != practice.Documents || !ok {
		return nil, fmt.Errorf("%s: no %s %q: %w", s.src.System, k.Singular(), id, practice.ErrNotFound)
	}
	it, rel, err := s.src.Read(ctx, itemID)
	if err != nil {
		return nil, err
	}
	return s.document(ctx, t, it, rel)
}

// document is the /v1 document of a store item in folder rel.
func (s *Store[T]) document(ctx context.Context, t practice.Tenant, it T, rel string) (json.RawMessage, error) {
	_, raw, err := s.documentID(ctx, t, it, rel)
	return raw, err
}

// documentID is document with the document's id.
func (s *Store[T]) documentID(ctx context.Context, t practice.Tenant, it T, rel string) (string, json.RawMessage, error) {
	fi, err := s.item(it, rel)
	if err != nil {
		return "", nil, upstream.Malformed(s.src.Label, s.src.Name(it), err)
	}
	d, err := s.filing.Document(ctx, t, s.src.Provider, fi)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", s.src.System, err)
	}
	if s.stamps != nil {
		seen, err := s.stamps.Of(ctx, stamps.Read{Kind: practice.Documents, ID: d.ID, Content: &d, Vendor: d.UpdatedAt})
		if err != nil {
			return "", nil, err
		}
		d.UpdatedAt, d.Version = seen.At, seen.Version()
	}
	raw, err := practice.Marshal(d)
	if err != nil {
		return "", nil, fmt.Errorf("%s: encode document: %w", s.src.System, err)
	}
	return d.ID, raw, nil
}

func (s *Store[T]) item(it T, rel string) (filing.Item, error) {
	fi, err := s.src.Item(it, rel)
	if err != nil {
		return fi, err
	}
	if fi.ID == "" || fi.Name == "" {
		return fi, errors.New("no id or name")
	}
	created, modified := s.src.Times(it)
	if fi.Created, err = time.Parse(time.RFC3339Nano, created); err != nil {
		return fi, err
	}
	if fi.Modified, err = time.Parse(time.RFC3339Nano, modified); err != nil {
		return fi, err
	}
	return fi, nil
}

// EscapePath escapes each segment of a store path, for a URL.
func EscapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

var _ practice.Reader = (*Store[struct{}])(nil)

// linkOptions returns the options a document store's module opens with:
// the firm's records system as the linker of client folders unless its
// block or the firm says `link_clients off`.
func linkOptions(system, linkClients string, d firmsystem.Deps) ([]Option, error) {
	if _, err := firmsystem.Linked(linkClients); err != nil {
		return nil, err
	}
	l := firmsystem.Linker(d, linkClients)
	if l == nil {
		return nil, nil
	}
	return []Option{WithClientLinker(l)}, nil
}

// An Adapter is a document store's adapter, as its module opens it.
type Adapter interface {
	practice.Reader
	Upstream() *upstream.Client
}

// Open is a document store module's Open: the firm's records system as the
// linker of client folders unless its block or the firm turns it off,
// then the adapter that build makes with those options, named label.
func Open[A Adapter](label, linkClients string, d firmsystem.Deps, build func(opts ...Option) (A, error)) (firmsystem.Opened, error) {
	opts, err := linkOptions(label, linkClients, d)
	if err != nil {
		return firmsystem.Opened{}, err
	}
	a, err := build(opts...)
	if err != nil {
		return firmsystem.Opened{}, err
	}
	opened := firmsystem.Opened{Label: label, Reader: a, Client: a.Upstream()}
	if n, ok := any(a).(notifier); ok {
		opened.Webhook = n.Webhook(d.Upstream.Changes)
	}
	return opened, nil
}

// notifier is a document store whose vendor notifies its changes: its
// receiver is the system's webhook.
type notifier interface {
	Webhook(changes.ChangeSink) http.Handler
}

// Validate is a document store module's Validate: link_clients is
// records or off, and build, given no dependencies, accepts
// the configuration as New would use it.
func Validate[A Adapter](linkClients string, build func() (A, error)) error {
	if _, err := firmsystem.Linked(linkClients); err != nil {
		return err
	}
	_, err := build()
	return err
}
