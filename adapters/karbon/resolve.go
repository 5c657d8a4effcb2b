package karbon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// Other adapters name the firm's clients their own way: Xero by contact id
// and name, document stores by folder name. These find the Karbon client
// so that invoices and documents link to the same cli_ ids as
// /v1/clients.
//
// Names are answered from a directory of every contact, organization and
// client group (their FullName, from Karbon's lists: a page per 100
// clients) rather than a request per name, which for a large firm's
// thousands of invoices and folders would spend hours of Karbon's budget.
// The directory is read again once older than directoryTTL. A name it
// lacks may be a client added since, so a miss looks for clients changed
// since the directory was read (contacts and organizations newest first,
// a page of each when little changed, and the client groups), at most
// once per missRefresh: names that match no client cost nothing more.
//
// When Karbon's lists cannot be read (a next link that repeats, a row we
// cannot use, an outage), names are looked up one by one for the next
// minute, as contact ids always are, so that the firm's other systems
// keep linking their records while Karbon's own sync fails.
//
// Karbon's lists do not carry ExternalKey (the linked ledger's contact
// id), it can only be filtered on, so a contact id is looked up with a
// filtered request per collection, and the answer, found or not, is kept
// ten minutes.

const (
	directoryTTL = 10 * time.Minute
	missRefresh  = time.Minute
	// changedOverlap reaches back before the last read when looking for
	// clients changed since: LastModifiedDateTime is Karbon's clock, the
	// read's start ours.
	changedOverlap = 2 * time.Minute
)

// ClientForContact returns the client whose ExternalKey is the Xero
// contact id (Karbon sets it when the practice links Xero), else the
// client named name exactly, else "". It implements xero.ClientResolver.
func (a *Adapter) ClientForContact(ctx context.Context, t practice.Tenant, contactID, name string) (string, error) {
	if !a.serves(t) {
		return "", nil
	}
	if contactID != "" {
		id, err := a.lookup(ctx, "ExternalKey", contactID)
		if err != nil || id != "" {
			return id, err
		}
	}
	if name == "" {
		return "", nil
	}
	return a.clientByName(ctx, name)
}

// ClientForFolder returns the client named exactly as a document folder,
// else "". It implements filing.ClientResolver.
func (a *Adapter) ClientForFolder(ctx context.Context, t practice.Tenant, name string) (string, error) {
	if !a.serves(t) || name == "" {
		return "", nil
	}
	return a.clientByName(ctx, name)
}

// clientByName is the contact, else organization, else client group
// named name exactly.
func (a *Adapter) clientByName(ctx context.Context, name string) (string, error) {
	id, err := a.nameInDirectory(ctx, name)
	if err != nil && ctx.Err() == nil {
		return a.lookup(ctx, "FullName", name)
	}
	return id, err
}

func (a *Adapter) nameInDirectory(ctx context.Context, name string) (string, error) {
	if err := a.ensureDirectory(ctx, false); err != nil {
		return "", err
	}
	if id, ok := a.dir.find(name); ok {
		return id, nil
	}
	if err := a.ensureDirectory(ctx, true); err != nil {
		return "", err
	}
	id, _ := a.dir.find(name)
	return id, nil
}

// clientDirectory is the firm's clients by FullName.
type clientDirectory struct {
	flight singleflight.Group

	mu sync.Mutex
	// names maps FullName to client id: a contact before an organization
	// before a client group, and within a collection the first in key
	// order (Karbon's own order of its lists).
	names map[string]string
	// keys holds each collection's key -> FullName (contacts,
	// organizations, client groups), from which names is made.
	keys [3]map[string]string
	// full is when the last full read started (zero: never), read when
	// the last read of either kind did.
	full, read time.Time
	// failed is when the last read that failed started, with its error;
	// zero once a read succeeds.
	failed  time.Time
	failErr error
}

func (d *clientDirectory) find(name string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.names[name]
	return id, ok
}

// need is what the directory needs read before a lookup.
type need int

const (
	needNothing need = iota
	needEverything
	needChanges  // the clients changed since the last read
	needUnusable // a read failed within the minute: look the name up on its own
)

// plan says what a lookup at now needs read first: everything, when the
// directory is missing or stale; after a miss, the clients changed since
// (since) when the last read is old enough; else nothing. Within a minute
// of a read that failed, a lookup that needs one is told to look its name
// up on its own instead, with that read's error.
func (d *clientDirectory) plan(now time.Time, miss bool) (n need, since time.Time, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.full.IsZero() || now.Sub(d.full) >= directoryTTL:
		n = needEverything
	case miss && now.Sub(d.read) >= missRefresh:
		n, since = needChanges, d.read.Add(-changedOverlap)
	default:
		return needNothing, time.Time{}, nil
	}
	if !d.failed.IsZero() && now.Sub(d.failed) < missRefresh {
		return needUnusable, time.Time{}, d.failErr
	}
	return n, since, nil
}

// ensureDirectory reads what the directory needs before a lookup, one
// read shared by the lookups waiting for it.
func (a *Adapter) ensureDirectory(ctx context.Context, miss bool) error {
	// A lookup that waited on a read of another kind (changes while it
	// needed everything) plans again once.
	for range 2 {
		switch n, _, err := a.dir.plan(a.clock.Now(), miss); n {
		case needNothing:
			return nil
		case needUnusable:
			return err
		}
		if _, err := shared(ctx, &a.dir.flight, "read", func() (struct{}, error) {
			return struct{}{}, a.readDirectory(ctx, miss)
		}); err != nil {
			return err
		}
	}
	return nil
}

// readDirectory reads every client, or those changed since the last read,
// through the same pages as the client list.
func (a *Adapter) readDirectory(ctx context.Context, miss bool) error {
	start := a.clock.Now()
	n, since, err := a.dir.plan(start, miss)
	if n == needNothing || n == needUnusable {
		return err // read, or failed, while this lookup waited
	}
	var rows []clientRow
	err = paging.All(ctx, func(ctx context.Context, token string) (paging.VendorPage[clientRow], error) {
		return a.fetchClients(ctx, since, token)
	}, func(_ context.Context, r clientRow) error {
		rows = append(rows, r)
		return nil
	})
	if err != nil {
		err = fmt.Errorf("karbon: read the client directory: %w", err)
		if ctx.Err() == nil {
			a.log.Warn("client names are looked up one by one for a minute", zap.Error(err))
			a.dir.fail(start, err)
		}
		return err
	}
	a.dir.apply(rows, start, n == needEverything)
	return nil
}

func (d *clientDirectory) fail(start time.Time, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failed, d.failErr = start, err
}

// apply takes in the rows of a read started at start: all of them, or
// those of contacts and organizations changed since the last read (a
// rename replaces the old name; a removal waits for the next full read)
// with every client group, whose list is read whole either way.
func (d *clientDirectory) apply(rows []clientRow, start time.Time, full bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	keys := d.keys
	for i := range keys {
		if full || i == 2 || keys[i] == nil {
			keys[i] = map[string]string{}
		}
	}
	for _, r := range rows {
		keys[collIndex(r.ref.kind)][r.ref.key] = r.name
	}
	names := map[string]string{}
	for i, kind := range []byte{'c', 'o', 'g'} {
		for _, key := range slices.Sorted(maps.Keys(keys[i])) {
			name := keys[i][key]
			if _, taken := names[name]; name != "" && !taken {
				names[name] = clientRef{kind, key}.id()
			}
		}
	}
	d.keys, d.names, d.read, d.failed, d.failErr = keys, names, start, time.Time{}, nil
	if full {
		d.full = start
	}
}

func collIndex(kind byte) int {
	switch kind {
	case 'c':
		return 0
	case 'o':
		return 1
	}
	return 2
}

// lookup finds the first contact, then organization (then client group,
// for names) whose prop equals value, with a filtered request each.
func (a *Adapter) lookup(ctx context.Context, prop, value string) (string, error) {
	key := prop + "\x00" + value
	if id, ok := a.looked.get(key, a.clock.Now()); ok {
		return id, nil
	}
	return shared(ctx, &a.looked.flight, key, func() (string, error) {
		now := a.clock.Now()
		if id, ok := a.looked.get(key, now); ok {
			return id, nil // answered while this lookup waited
		}
		colls := []byte{'c', 'o'}
		if prop == "FullName" {
			colls = append(colls, 'g')
		}
		q := url.Values{"$top": {"2"}, "$filter": {prop + " eq " + odataString(value)}}
		id := ""
		for _, k := range colls {
			ref := clientRef{kind: k}
			var l odataList[struct{ ContactKey, OrganizationKey, ClientGroupKey string }]
			if _, err := a.c.JSON(ctx, upstream.Request{Path: "/v3/" + ref.collection(), Query: q}, "client lookup", &l); err != nil {
				return "", fmt.Errorf("karbon: find client by %s: %w", strings.ToLower(prop), err)
			}
			if len(l.Value) > 0 {
				v := l.Value[0]
				if ref.key = v.ContactKey + v.OrganizationKey + v.ClientGroupKey; validKey(ref.key) {
					id = ref.id()
					break
				}
			}
		}
		a.looked.put(key, id, now)
		return id, nil
	})
}

// shared runs fn once for the concurrent callers with the same key. A
// caller whose own context is live does not take another's cancellation
// as its answer: it runs fn again.
func shared[T any](ctx context.Context, g *singleflight.Group, key string, fn func() (T, error)) (T, error) {
	var (
		v   any
		err error
	)
	for range 3 {
		v, err, _ = g.Do(key, func() (any, error) { return fn() })
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.Canceled) {
			break
		}
	}
	t, _ := v.(T)
	return t, err
}

// resolutions keeps lookups for ten minutes, at most 50,000 of them.
type resolutions struct {
	flight singleflight.Group

	mu sync.Mutex
	m  map[string]resolution
}

type resolution struct {
	id string
	at time.Time
}

func (r *resolutions) get(key string, now time.Time) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[key]
	if !ok || now.Sub(e.at) > 10*time.Minute {
		return "", false
	}
	return e.id, true
}

func (r *resolutions) put(key, id string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]resolution{}
	}
	if len(r.m) >= 50000 {
		// Expired answers go first; forgetting everything would look
		// up a large ledger's contacts all over again.
		for k, e := range r.m {
			if now.Sub(e.at) > 10*time.Minute {
				delete(r.m, k)
			}
		}
		for k := range r.m {
			if len(r.m) < 25000 {
				break
			}
			delete(r.m, k)
		}
	}
	r.m[key] = resolution{id, now}
}
