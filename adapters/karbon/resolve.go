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

	"github.com/practicegw/practicegw/adapters/kit/linking"
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

// LinkClient is the client a ledger's customer or a document store's
// folder stands for (linking's rule): a client of this practice's own
// billing by its id (the candidate's Account is this adapter's); else the
// one contact or organization whose ExternalKey is the customer's id
// (Karbon sets it to the Xero contact id or the Intuit customer id when
// the practice links its ledger), else the one client of the normalised
// name. It implements linking.Linker.
func (a *Adapter) LinkClient(ctx context.Context, t practice.Tenant, c linking.Candidate) (linking.Link, error) {
	if !a.serves(t) {
		return linking.Link{}, nil
	}
	if c.Account != "" && c.Account == a.c.BudgetAccount() {
		// The same practice's billing: the client is this practice's,
		// whose id /v1/clients reads. A name it shares with another
		// client would link nothing.
		if ref, ok := parseClientID(c.Ref); ok {
			return linking.Link{Client: ref.id(), Outcome: linking.Linked}, nil
		}
		return linking.Link{}, nil
	}
	if c.External != "" {
		l, err := a.lookup(ctx, "ExternalKey", c.External)
		if err != nil || l.Outcome != linking.Missing {
			return l, err
		}
	}
	if linking.Name(c.Name) == "" {
		return linking.Link{}, nil
	}
	return a.clientByName(ctx, c.Name)
}

// clientByName is the one contact, organization or client group of the
// name, from the directory; by Karbon's exact FullName, asked of each
// collection, while the directory cannot be read.
func (a *Adapter) clientByName(ctx context.Context, name string) (linking.Link, error) {
	l, err := a.nameInDirectory(ctx, name)
	if err != nil && ctx.Err() == nil && !upstream.Refused(err) {
		return a.lookup(ctx, "FullName", strings.TrimSpace(name))
	}
	return l, err
}

func (a *Adapter) nameInDirectory(ctx context.Context, name string) (linking.Link, error) {
	if err := a.ensureDirectory(ctx, false); err != nil {
		return linking.Link{}, err
	}
	if l := a.dir.find(name); l.Outcome != linking.Missing {
		return l, nil
	}
	if err := a.ensureDirectory(ctx, true); err != nil {
		return linking.Link{}, err
	}
	return a.dir.find(name), nil
}

// clientDirectory is the firm's clients by FullName.
type clientDirectory struct {
	flight singleflight.Group

	mu sync.Mutex
	// names holds every contact, organization and client group by its
	// normalised FullName: a name two of them share links nothing.
	names *linking.Directory
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

func (d *clientDirectory) find(name string) linking.Link {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.names == nil {
		return linking.Link{}
	}
	return d.names.Match(linking.Candidate{Name: name})
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
		// A read refused for want of budget now (upstream.WithoutWaiting)
		// sent nothing: Karbon's lists are no less readable.
		if ctx.Err() == nil && !upstream.Refused(err) {
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
	var entries []linking.Entry
	for i, kind := range []byte{'c', 'o', 'g'} {
		for _, key := range slices.Sorted(maps.Keys(keys[i])) {
			entries = append(entries, linking.Entry{ID: clientRef{kind, key}.id(), Name: keys[i][key]})
		}
	}
	names := linking.NewDirectory(entries)
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

// lookup finds the one contact or organization (or client group, for
// names) whose prop equals value, with a filtered request of each: two
// or more are ambiguous.
func (a *Adapter) lookup(ctx context.Context, prop, value string) (linking.Link, error) {
	key := prop + "\x00" + value
	if l, ok := a.looked.get(key, a.clock.Now()); ok {
		return l, nil
	}
	return shared(ctx, &a.looked.flight, key, func() (linking.Link, error) {
		now := a.clock.Now()
		if l, ok := a.looked.get(key, now); ok {
			return l, nil // answered while this lookup waited
		}
		colls := []byte{'c', 'o'}
		if prop == "FullName" {
			colls = append(colls, 'g')
		}
		q := url.Values{"$top": {"2"}, "$filter": {prop + " eq " + odataString(value)}}
		var ids []string
		for _, k := range colls {
			ref := clientRef{kind: k}
			var l odataList[struct{ ContactKey, OrganizationKey, ClientGroupKey string }]
			if _, err := a.c.JSON(ctx, upstream.Request{Path: "/v3/" + ref.collection(), Query: q}, "client lookup", &l); err != nil {
				return linking.Link{}, fmt.Errorf("karbon: find client by %s: %w", strings.ToLower(prop), err)
			}
			for _, v := range l.Value {
				if ref.key = v.ContactKey + v.OrganizationKey + v.ClientGroupKey; validKey(ref.key) && !slices.Contains(ids, ref.id()) {
					ids = append(ids, ref.id())
				}
			}
			if len(ids) > 1 {
				break
			}
		}
		l := linking.Link{}
		switch len(ids) {
		case 0:
		case 1:
			l = linking.Link{Client: ids[0], Outcome: linking.Linked}
		default:
			l = linking.Link{Outcome: linking.Ambiguous}
		}
		a.looked.put(key, l, now)
		return l, nil
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
	link linking.Link
	at   time.Time
}

func (r *resolutions) get(key string, now time.Time) (linking.Link, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[key]
	if !ok || now.Sub(e.at) > 10*time.Minute {
		return linking.Link{}, false
	}
	return e.link, true
}

func (r *resolutions) put(key string, l linking.Link, now time.Time) {
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
	r.m[key] = resolution{l, now}
}
