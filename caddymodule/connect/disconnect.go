package connect

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/store/connection"
)

type actorKey struct{}

// Actor is who disconnects a connection, for the reason it keeps: the
// same words wherever it is done.
type Actor struct {
	// Name and Credential are the acting credential's name and id.
	Name, Credential string
	// Where is where it was done: "in the console", "through the API".
	Where string
}

// WithActor names who acts in ctx. Without one, it is the gateway's
// operator at its admin endpoint, which practicegw connect talks to.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// actor says who acts in ctx, in words.
func actor(ctx context.Context) string {
	a, ok := ctx.Value(actorKey{}).(Actor)
	if !ok || a.Credential == "" {
		return "the gateway's operator with practicegw connect disconnect"
	}
	who := fmt.Sprintf("%s (credential %s)", a.Name, a.Credential)
	if a.Name == "" {
		who = "credential " + a.Credential
	}
	return strings.TrimSpace(who + " " + a.Where)
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
	s, _ := Lookup(c.Role, c.System)
	if s.Label == "" {
		// A system this build no longer has: its secrets still go.
		s = System{Name: c.System, Connects: firmsystem.Connects{Label: c.System}}
	}
	var unrevoked error
	if m.cfg.app(s.App) != nil {
		unrevoked = m.revoke(ctx, c, s)
	} else {
		unrevoked = fmt.Errorf("no %s app is registered any more", s.Label)
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
		reason += fmt.Sprintf("; %s could not be reached to revoke the gateway's access, which the firm can remove in %s's settings", s.Label, s.Label)
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

// revoke ends the grant at the vendor, as its app does it (RFC 7009 with
// the refresh token for Xero and Google, Dropbox's token/revoke), and
// deletes the webhook subscriptions the gateway made. An app with no
// revocation (Microsoft's identity platform offers none to a client)
// leaves the grant to end when the firm removes the app, or unused.
func (m *Manager) revoke(ctx context.Context, c connection.Connection, s System) error {
	app := m.cfg.app(s.App)
	if sub, ok := app.(firmsystem.Subscriber); ok {
		key, err := m.d.Upstream.StateStore().Last(ctx, SecretKey(c.ID, "access_key"))
		if err != nil || len(key) == 0 {
			return err
		}
		return sub.Unsubscribe(ctx, m.vendorDeps(), c.Role, string(key))
	}
	if r, ok := app.(firmsystem.Revoker); ok {
		if err := r.Revoke(ctx, m.vendorDeps(), s.Name, c.ID); err != nil {
			// The error quotes the path only; the token was in the body.
			return fmt.Errorf("revoke at %s: %w", s.Label, err)
		}
	}
	return nil
}

// forgetSecrets drops the connection's tokens and keys from the upstream
// state store.
func (m *Manager) forgetSecrets(ctx context.Context, c connection.Connection, s System) error {
	if app := m.consent(s); app != nil {
		client := app.OAuth(s.Name)
		if err := oauthtoken.Forget(ctx, m.d.Upstream, client.Tokens, tokenConfig(c, client)); err != nil {
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
