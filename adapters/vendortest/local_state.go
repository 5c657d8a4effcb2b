package vendortest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// What practicegw-vendors keeps across a restart: what the doubles
// issued, so that a gateway connected to them stays connected. Each
// identity service's grants keep their access and refresh tokens and the
// organisations they reach, and Karbon its webhook subscriptions. The
// doubles' records start again from their seed.

// localState is the file's content.
type localState struct {
	Identities map[string]identityState `json:"identities"`
	// KarbonSubscriptions are Karbon's webhook subscriptions.
	KarbonSubscriptions []KarbonSubscription `json:"karbon_subscriptions"`
}

// identityState is what an identity service issued.
type identityState struct {
	Grants []grantState `json:"grants"`
}

// grantState is one grant: the consent, the organisations it reaches,
// and its tokens, each refresh token with the end of its grace period
// (zero for the newest) and each access token with its expiry.
type grantState struct {
	Grant
	Connections   []connectionState    `json:"connections"`
	RefreshTokens map[string]time.Time `json:"refresh_tokens"`
	AccessTokens  map[string]time.Time `json:"access_tokens"`
}

type connectionState struct {
	ID       string    `json:"id"`
	TenantID string    `json:"tenant_id"`
	Created  time.Time `json:"created"`
}

// state is what the service issued; expired access tokens are left out.
func (i *Identity) state() identityState {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := identityState{Grants: []grantState{}}
	byGrant := map[*grant]int{}
	for n, g := range i.grants {
		gs := grantState{Grant: g.Grant, RefreshTokens: map[string]time.Time{}, AccessTokens: map[string]time.Time{}}
		gs.Tenants = nil
		for _, c := range g.connections {
			gs.Connections = append(gs.Connections, connectionState{ID: c.id, TenantID: c.tenantID, Created: c.created})
		}
		byGrant[g] = n
		out.Grants = append(out.Grants, gs)
	}
	for tok, rt := range i.refresh {
		if n, ok := byGrant[rt.grant]; ok {
			out.Grants[n].RefreshTokens[tok] = rt.until
		}
	}
	now := i.now()
	for tok, at := range i.access {
		if n, ok := byGrant[at.grant]; ok && now.Before(at.expires) {
			out.Grants[n].AccessTokens[tok] = at.expires
		}
	}
	return out
}

// restore takes back what the service issued before.
func (i *Identity) restore(s identityState) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, gs := range s.Grants {
		g := &grant{Grant: gs.Grant}
		for _, c := range gs.Connections {
			g.connections = append(g.connections, xeroConnection{id: c.ID, tenantID: c.TenantID, created: c.Created})
		}
		for tok, until := range gs.RefreshTokens {
			i.refresh[tok] = &refreshToken{grant: g, until: until}
			g.refreshes = append(g.refreshes, tok)
		}
		for tok, expires := range gs.AccessTokens {
			i.access[tok] = &accessToken{grant: g, expires: expires}
		}
		i.grants = append(i.grants, g)
	}
}

// restoreSubscriptions takes back Karbon's webhook subscriptions.
func (k *Karbon) restoreSubscriptions(subs []KarbonSubscription) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.subs == nil {
		k.subs = map[string]map[string]*KarbonSubscription{}
	}
	for _, s := range subs {
		if k.subs[s.AccessKey] == nil {
			k.subs[s.AccessKey] = map[string]*KarbonSubscription{}
		}
		k.subs[s.AccessKey][s.WebhookType] = &s
	}
}

// snapshot is what the doubles issued, as the file keeps it.
func (l *Local) snapshot() ([]byte, error) {
	st := localState{Identities: map[string]identityState{}, KarbonSubscriptions: l.Karbon.Subscriptions()}
	for name, id := range l.identities() {
		st.Identities[name] = id.state()
	}
	return json.MarshalIndent(st, "", "  ")
}

// identities are the doubles' identity services, by the name the file
// keeps each under.
func (l *Local) identities() map[string]*Identity {
	return map[string]*Identity{"xero": l.Xero.Identity, "microsoft": l.Graph.Identity, "google": l.GDrive.Identity,
		"dropbox": l.Dropbox.Identity, "intuit": l.QuickBooks.Identity}
}

// load takes back what the file keeps, if there is one.
func (l *Local) load() error {
	b, err := os.ReadFile(l.state)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st localState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("%s: %w", l.state, err)
	}
	for name, id := range l.identities() {
		id.restore(st.Identities[name])
	}
	l.Karbon.restoreSubscriptions(st.KarbonSubscriptions)
	l.saved = b
	return nil
}

// save writes what the doubles issued when it changed since it was last
// written, readable by the user alone, in one rename.
func (l *Local) save() error {
	b, err := l.snapshot()
	if err != nil || bytes.Equal(b, l.saved) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(l.state), 0o700); err != nil {
		return err
	}
	tmp := l.state + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, l.state); err != nil {
		return err
	}
	l.saved = b
	return nil
}
