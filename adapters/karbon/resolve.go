package karbon

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/practicegw/practicegw/adapters/upstream"
	"github.com/practicegw/practicegw/internal/practice"
)

// Other adapters name the firm's clients their own way: Xero by contact id,
// document stores by folder name. These look the client up in Karbon so
// invoices and documents link to the same cli_ ids as /v1/clients.
// Answers, found or not, are kept ten minutes.

// ClientForContact returns the client whose ExternalKey is the Xero
// contact id (Karbon sets it when the practice links Xero), else the
// client named name exactly, else "". It implements xero.ClientResolver.
func (a *Adapter) ClientForContact(ctx context.Context, t practice.Tenant, contactID, name string) (string, error) {
	if !a.serves(t) {
		return "", nil
	}
	id, err := a.lookup(ctx, "ExternalKey", contactID)
	if err != nil || id != "" || name == "" {
		return id, err
	}
	return a.lookup(ctx, "FullName", name)
}

// ClientForFolder returns the client named exactly as a document folder,
// else "". It implements filing.ClientResolver.
func (a *Adapter) ClientForFolder(ctx context.Context, t practice.Tenant, name string) (string, error) {
	if !a.serves(t) || name == "" {
		return "", nil
	}
	return a.lookup(ctx, "FullName", name)
}

// lookup finds the first contact, then organization (then client group,
// for names) whose prop equals value.
func (a *Adapter) lookup(ctx context.Context, prop, value string) (string, error) {
	key := prop + "\x00" + value
	now := a.clock.Now()
	if id, ok := a.resolved.get(key, now); ok {
		return id, nil
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
			ref.key = v.ContactKey + v.OrganizationKey + v.ClientGroupKey
			if validKey(ref.key) {
				id = ref.id()
				break
			}
		}
	}
	a.resolved.put(key, id, now)
	return id, nil
}

// resolutions keeps lookups for ten minutes, at most 10,000 of them.
type resolutions struct {
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
	if r.m == nil || len(r.m) >= 10000 {
		r.m = map[string]resolution{}
	}
	r.m[key] = resolution{id, now}
}
