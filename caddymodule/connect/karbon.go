package connect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// Karbon has no OAuth: the firm gives an access key, which works with
// the operator's application bearer. The gateway checks it, keeps it
// sealed (SecretKey(id, "access_key")), and makes the webhook
// subscriptions that keep the read model current, signed with a key it
// generates (SecretKey(id, "webhook_key")).

// WebhookPath is where Karbon delivers a connection's webhooks, under
// public_url; the connection's id follows.
const WebhookPath = "/connect/webhooks/karbon/"

// karbonClient is the upstream client of one access key.
func (m *Manager) karbonClient(accessKey string) (*upstream.Client, error) {
	d := m.d.Upstream
	if m.hc.Transport != nil {
		d.Transport = m.hc.Transport
	}
	return karbon.NewAPIClient(m.cfg.Karbon.BaseURL, m.cfg.Karbon.Bearer, accessKey, d)
}

// checkKarbonKey makes one cheap call with the key: a key Karbon refuses
// is the caller's parameter error (never quoted back).
func (m *Manager) checkKarbonKey(ctx context.Context, accessKey string) error {
	c, err := m.karbonClient(accessKey)
	if err != nil {
		return err
	}
	refused, err := karbon.CheckAccess(ctx, c)
	if refused {
		return practice.Invalid("access_key", "Karbon refused this access key; copy it again from Karbon's Settings > Connected Apps.")
	}
	return err
}

// connectKarbon keeps the access key, makes sure of the connection's
// webhook subscriptions and marks it connected. The signing key is made
// once per connection: a reconnect with a new access key keeps it, so a
// subscription Karbon still holds stays valid.
func (m *Manager) connectKarbon(ctx context.Context, c connection.Connection, accessKey string) (connection.Connection, error) {
	state := m.d.Upstream.StateStore()
	if err := state.Save(ctx, SecretKey(c.ID, "access_key"), []byte(accessKey)); err != nil {
		return c, fmt.Errorf("keep the access key: %w", err)
	}
	signing, err := state.Last(ctx, SecretKey(c.ID, "webhook_key"))
	if err != nil {
		return c, fmt.Errorf("read the webhook signing key: %w", err)
	}
	if len(signing) == 0 {
		// Karbon takes letters, digits, dashes and underscores, and the
		// adapter's check (webhook.go) uses the key's bytes as they are:
		// 32 random bytes in base64url are both.
		signing = []byte(randomToken(32))
		if err := state.Save(ctx, SecretKey(c.ID, "webhook_key"), signing); err != nil {
			return c, fmt.Errorf("keep the webhook signing key: %w", err)
		}
	}
	if _, err := m.ensureSubscriptions(ctx, c, accessKey, string(signing)); err != nil {
		m.log.Warn("karbon webhook subscriptions not made", zap.String("connection", c.ID), zap.Error(err))
		_, _ = m.write(ctx, c.ID, func(c *connection.Connection) error {
			if c.Status == connection.Disconnected {
				return errConnectionState(*c, "it was disconnected meanwhile")
			}
			c.Reason = "Karbon's webhook subscriptions could not be made; reconnect to try again"
			return nil
		})
		return c, err
	}
	return m.write(ctx, c.ID, func(c *connection.Connection) error {
		if c.Status == connection.Disconnected {
			return errConnectionState(*c, "it was disconnected meanwhile")
		}
		now := m.clock.Now().UTC()
		c.Status, c.Reason, c.Choices = connection.Connected, "", nil
		c.ConnectedAt = &now
		return nil
	})
}

// ensureSubscriptions makes every subscription the connection needs that
// Karbon does not hold: none (Karbon ends one after ten failed
// deliveries) or one to another address. It answers the types it made.
func (m *Manager) ensureSubscriptions(ctx context.Context, c connection.Connection, accessKey, signing string) ([]string, error) {
	kc, err := m.karbonClient(accessKey)
	if err != nil {
		return nil, err
	}
	target := m.cfg.PublicURL + WebhookPath + c.ID
	var made []string
	for _, typ := range karbon.SubscriptionTypes {
		sub, err := karbon.SubscriptionOf(ctx, kc, typ)
		if err != nil {
			return made, err
		}
		if sub != nil && sub.TargetUrl == target && sub.WebhookType == typ {
			continue
		}
		if sub != nil {
			// Karbon holds one subscription per type: one to another
			// address is replaced.
			if err := karbon.Unsubscribe(ctx, kc, typ); err != nil {
				return made, err
			}
		}
		if err := karbon.Subscribe(ctx, kc, typ, target, signing); err != nil {
			return made, err
		}
		made = append(made, typ)
	}
	return made, nil
}

// SubscriptionCheck is how often Run checks Karbon's subscriptions.
const SubscriptionCheck = time.Hour

// Run checks, every SubscriptionCheck until ctx ends, the webhook
// subscriptions of every connected Karbon connection (CheckSubscriptions).
func (m *Manager) Run(ctx context.Context) error {
	for {
		if err := m.CheckSubscriptions(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("karbon webhook subscriptions not checked; next check in an hour", zap.Error(err))
		}
		if err := m.clock.Sleep(ctx, SubscriptionCheck); err != nil {
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// CheckSubscriptions is one round of Run, under a lease so that one
// instance at a time makes it: each connected Karbon connection's
// subscriptions Karbon cancelled are made again, and a connection whose
// access key Karbon refuses needs reconnecting.
func (m *Manager) CheckSubscriptions(ctx context.Context) error {
	if m.cfg == nil || m.cfg.Karbon == nil {
		return nil
	}
	if locks := m.d.Upstream.Locks; locks != nil {
		const name = "connect/karbon-subscriptions"
		ok, err := locks.Lease(ctx, name, m.holder, 10*time.Minute)
		if err != nil || !ok {
			return err
		}
		defer func() { _ = locks.Release(context.WithoutCancel(ctx), name, m.holder) }()
	}
	cs, err := m.d.Connections.Connections(ctx, "")
	if err != nil {
		return fmt.Errorf("list connections: %w", err)
	}
	var failed error
	for _, c := range cs {
		if c.System != "karbon" || c.Status != connection.Connected {
			continue
		}
		if err := m.checkConnection(ctx, c); err != nil {
			failed = errors.Join(failed, fmt.Errorf("%s: %w", c.ID, err))
		}
	}
	return failed
}

func (m *Manager) checkConnection(ctx context.Context, c connection.Connection) error {
	// Held, and read again: a disconnect that removed the subscriptions
	// meanwhile must not see them made again.
	release, err := m.hold(ctx, "connection/"+c.ID)
	if err != nil {
		return err
	}
	defer release()
	if c, err = m.d.Connections.Connection(ctx, c.ID); err != nil || c.Status != connection.Connected {
		return err
	}
	state := m.d.Upstream.StateStore()
	key, err := state.Last(ctx, SecretKey(c.ID, "access_key"))
	if err != nil {
		return err
	}
	signing, err := state.Last(ctx, SecretKey(c.ID, "webhook_key"))
	if err != nil {
		return err
	}
	made, err := m.ensureSubscriptions(ctx, c, string(key), string(signing))
	for _, typ := range made {
		m.log.Info("karbon webhook subscription made again: Karbon had ended it", zap.String("connection", c.ID),
			zap.String("firm", c.Firm), zap.String("type", typ))
	}
	if karbon.Refused(err) || len(key) == 0 {
		return m.needsReconnect(ctx, c.ID, "Karbon refused the access key; reconnect with a new one")
	}
	return err
}
