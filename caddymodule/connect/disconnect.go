package connect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/dropbox"
	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/store/connection"
)

type actorKey struct{}

// WithActor names who acts in ctx (a credential's id), for the reason a
// disconnected connection gives; without one it is "administrator".
func WithActor(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, actorKey{}, who)
}

func actor(ctx context.Context) string {
	if who, _ := ctx.Value(actorKey{}).(string); who != "" {
		return who
	}
	return "administrator"
}

// Disconnect ends a connection: its grant is revoked at the vendor where
// the vendor offers revocation, the webhook subscriptions the gateway made
// are deleted, its secrets are forgotten, its sync stopped and its copy
// purged. A vendor that cannot be reached to revoke does not hold the
// disconnect up: the reason says so. A disconnected connection is kept,
// so that the firm sees what happened.
func (m *Manager) Disconnect(ctx context.Context, firm, id string) (connection.View, error) {
	c, release, err := m.loadHeld(ctx, firm, id)
	if err != nil {
		return connection.View{}, err
	}
	defer release()
	if c.Status == connection.Disconnected {
		return m.view(c, ""), nil
	}
	s := systems[c.System]
	var unrevoked error
	if m.cfg.registered(s) {
		unrevoked = m.revoke(ctx, c, s)
	} else {
		unrevoked = fmt.Errorf("no %s app is registered any more", s.vendor)
	}
	if err := m.forgetSecrets(ctx, c, s); err != nil {
		return connection.View{}, err
	}
	if m.d.Runtime != nil {
		if err := m.d.Runtime.Purge(ctx, c); err != nil {
			return connection.View{}, fmt.Errorf("purge the connection's copy: %w", err)
		}
	}
	reason := "disconnected by " + actor(ctx)
	if unrevoked != nil {
		m.log.Warn("connection disconnected without revoking its grant at the vendor", zap.String("connection", c.ID),
			zap.String("system", c.System), zap.Error(unrevoked))
		reason += fmt.Sprintf("; %s could not be reached to revoke the gateway's access, which the firm can remove in %s's settings", s.vendor, s.vendor)
	}
	c, err = m.write(ctx, c.ID, func(c *connection.Connection) error {
		c.Status, c.Reason, c.Choices = connection.Disconnected, reason, nil
		return nil
	})
	if err != nil {
		return connection.View{}, err
	}
	m.log.Info("connection disconnected", zap.String("connection", c.ID), zap.String("firm", c.Firm),
		zap.String("system", c.System), zap.String("by", actor(ctx)))
	return m.view(c, ""), nil
}

// revoke ends the grant at the vendor: RFC 7009 with the refresh token
// (Xero, Google; Xero's revocation also removes the organisations the
// grant reached from GET /connections), Dropbox's token/revoke with a
// current access token, Karbon's subscriptions deleted. Microsoft's
// identity platform offers no revocation of a refresh token by its
// client: its grant ends when the firm removes the app, or unused.
func (m *Manager) revoke(ctx context.Context, c connection.Connection, s system) error {
	if s.block == "karbon" {
		return m.unsubscribeKarbon(ctx, c)
	}
	app := m.cfg.oauthApp(s)
	if app.RevokeURL == "" {
		return nil
	}
	tok, err := oauthtoken.Stored(ctx, m.d.Upstream, s.tokens, m.tokenConfig(c, s))
	if err != nil || tok == nil {
		return err
	}
	if s.name == "dropbox" {
		// A grant refused on the way is what a disconnect wants: nobody
		// is told.
		d := m.d.Upstream
		d.GrantRefused = nil
		src, err := oauthtoken.New(s.tokens, m.tokenConfig(c, s), app.TokenURL, "body", d)
		if err != nil {
			return err
		}
		dc, err := m.client(s.name, origin(app.RevokeURL), src)
		if err != nil {
			return err
		}
		return dropbox.Revoke(ctx, dc, app.RevokeURL)
	}
	return m.revokeRFC7009(ctx, app, s, tok.RefreshToken)
}

// revokeRFC7009 revokes a refresh token (RFC 7009), the client
// authenticating as it does at the token endpoint.
func (m *Manager) revokeRFC7009(ctx context.Context, app *OAuthApp, s system, refresh string) error {
	form := url.Values{"token": {refresh}, "token_type_hint": {"refresh_token"}}
	var header http.Header
	if s.style == oauth2.AuthStyleInParams {
		form.Set("client_id", app.ClientID)
		form.Set("client_secret", app.ClientSecret)
	} else {
		req, _ := http.NewRequest(http.MethodPost, app.RevokeURL, nil)
		req.SetBasicAuth(url.QueryEscape(app.ClientID), url.QueryEscape(app.ClientSecret))
		header = http.Header{"Authorization": req.Header["Authorization"]}
	}
	c, err := m.client(s.name, origin(app.RevokeURL), nil)
	if err != nil {
		return err
	}
	_, err = c.Do(ctx, upstream.Request{Method: http.MethodPost, Path: app.RevokeURL, Header: header,
		Body: []byte(form.Encode()), ContentType: "application/x-www-form-urlencoded"})
	if err != nil {
		// The error quotes the path only; the token was in the body.
		return fmt.Errorf("revoke at %s: %w", s.vendor, err)
	}
	return nil
}

// unsubscribeKarbon deletes the webhook subscriptions of every type the
// gateway made.
func (m *Manager) unsubscribeKarbon(ctx context.Context, c connection.Connection) error {
	key, err := m.d.Upstream.StateStore().Last(ctx, SecretKey(c.ID, "access_key"))
	if err != nil || len(key) == 0 {
		return err
	}
	kc, err := m.karbonClient(string(key))
	if err != nil {
		return err
	}
	var failed error
	for _, typ := range karbon.SubscriptionTypes {
		failed = errors.Join(failed, karbon.Unsubscribe(ctx, kc, typ))
	}
	return failed
}

// forgetSecrets drops the connection's tokens and keys from the upstream
// state store.
func (m *Manager) forgetSecrets(ctx context.Context, c connection.Connection, s system) error {
	if s.tokens != "" && m.cfg.oauthApp(s) != nil {
		if err := oauthtoken.Forget(ctx, m.d.Upstream, s.tokens, m.tokenConfig(c, s)); err != nil {
			return err
		}
	}
	for _, name := range []string{"access_key", "webhook_key"} {
		if err := m.d.Upstream.StateStore().Save(ctx, SecretKey(c.ID, name), nil); err != nil {
			return fmt.Errorf("forget the connection's %s: %w", strings.ReplaceAll(name, "_", " "), err)
		}
	}
	return nil
}
