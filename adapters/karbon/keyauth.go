package karbon

import (
	"context"
	"sync/atomic"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

// KeyRefused is the reason a connection whose access key Karbon refuses
// gives: the gateway's words, for the firm's administrator.
const KeyRefused = "Karbon refused the access key; reconnect with a new one"

// keyAuth puts the application's bearer and the firm's access key on
// Karbon's requests, and tells the gateway (upstream.Deps.GrantRefused)
// once when Karbon refuses the key: a 401 or 403 confirmed by a second
// call (one user), so that one glitch does not pause a connection, as an
// OAuth2 grant's invalid_grant does.
type keyAuth struct {
	upstream.Headers
	refused func(reason string)
	// client is the one keyAuth authorizes, set once it is made.
	client atomic.Pointer[upstream.Client]
	// confirming is true while the second call is out: its own refusal
	// is its answer, not another to confirm.
	confirming atomic.Bool
	// told is true once the gateway was told: a paused connection's
	// adapter is replaced when it is reconnected.
	told atomic.Bool
}

func newKeyAuth(bearer, accessKey string, refused func(string)) *keyAuth {
	return &keyAuth{Headers: upstream.Headers{"Authorization": "Bearer " + bearer, "AccessKey": accessKey}, refused: refused}
}

// KeyRejected implements upstream.KeyRejecter.
func (k *keyAuth) KeyRejected(ctx context.Context, _ int) {
	c := k.client.Load()
	if k.refused == nil || c == nil || k.told.Load() || !k.confirming.CompareAndSwap(false, true) {
		return
	}
	defer k.confirming.Store(false)
	if refused, _ := CheckAccess(ctx, c); refused && k.told.CompareAndSwap(false, true) {
		k.refused(KeyRefused)
	}
}

// newKeyClient is an upstream client whose key refusals keyAuth tells.
func newKeyClient(o upstream.Options, bearer, accessKey string, d upstream.Deps) (*upstream.Client, error) {
	auth := newKeyAuth(bearer, accessKey, d.GrantRefused)
	o.Auth = auth
	c, err := upstream.NewClient(o, d)
	if err != nil {
		return nil, err
	}
	auth.client.Store(c)
	return c, nil
}

var _ upstream.KeyRejecter = (*keyAuth)(nil)
