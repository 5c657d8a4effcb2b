package connect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// A system connected by an access key (Karbon) has no OAuth: the firm
// gives a key, which works with the operator's app. The gateway checks
// it, keeps it sealed (SecretKey(id, "access_key")), and, when the app
// manages the vendor's webhooks (firmsystem.Subscriber), makes the
// subscriptions that keep the read model current, delivered to the
// connection's own address and signed with a key it generates
// (SecretKey(id, "webhook_key")).

// WebhookPath is where vendors deliver the webhooks of the subscriptions
// the gateway made, under public_url: the system and the connection's id
// follow (/connect/webhooks/karbon/con_…); an app that receives every
// organisation's webhooks (firmsystem.Deliveries) is served at
// WebhookPath + its name.
const WebhookPath = "/connect/webhooks/"

// keyApp is s's app, which takes access keys; nil when not registered.
func (m *Manager) keyApp(s System) firmsystem.AccessKey {
	app, _ := m.cfg.app(s.App).(firmsystem.AccessKey)
	return app
}

// checkKey makes one cheap call with the key: a key the vendor refuses
// is the caller's parameter error, in the app's words (never quoting the
// key back).
func (m *Manager) checkKey(ctx context.Context, s System, accessKey string) error {
	app := m.keyApp(s)
	if app == nil {
		return errNotRegistered(s)
	}
	return keyRefusal(app.CheckKey(ctx, m.vendorDeps(), accessKey))
}

// keyRefusal is err, or the caller's parameter error in the app's words
// when the vendor refused the key.
func keyRefusal(err error) error {
	var refused *firmsystem.RefusedError
	if errors.As(err, &refused) {
		return practice.Invalid("access_key", "%s", refused.Message)
	}
	return err
}

// connectKey keeps the access key, makes sure of the connection's
// webhook subscriptions when its app manages them, and marks it
// connected. The signing key is made once per connection: a reconnect
// with a new access key keeps it, so a subscription the vendor still
// holds stays valid.
func (m *Manager) connectKey(ctx context.Context, c connection.Connection, s System, accessKey string) (connection.Connection, error) {
	return m.keepKey(ctx, c, s, accessKey, false)
}

// reconnectKey is connectKey with a new key for a connection that had
// one: a new attempt, so that every instance opens the system again with
// the key (it reads it when the attempt changes), the running adapters'
// old key being one the vendor may already refuse.
func (m *Manager) reconnectKey(ctx context.Context, c connection.Connection, s System, accessKey string) (connection.Connection, error) {
	return m.keepKey(ctx, c, s, accessKey, true)
}

func (m *Manager) keepKey(ctx context.Context, c connection.Connection, s System, accessKey string, reconnect bool) (connection.Connection, error) {
	var subscribed error
	if sub, ok := m.cfg.app(s.App).(firmsystem.Subscriber); ok {
		subscribed = m.subscribe(ctx, c, s, sub, accessKey)
		// The vendor may refuse the key it took a moment ago (revoked
		// meanwhile, or a glitch): answered as the check answers it, and
		// like the check's refusal it changes nothing. A reconnect keeps
		// its key and attempt, so no instance reopens the system with a
		// key the vendor refuses; a first connection stays pending, with
		// no key, for the administrator to connect again.
		var refused *firmsystem.RefusedError
		if errors.As(subscribed, &refused) {
			m.log.Warn("access key refused while subscribing", zap.String("connection", c.ID), zap.String("system", c.System))
			if !reconnect {
				if saved, err := m.write(ctx, c.ID, func(c *connection.Connection) error {
					c.Reason = s.Label + " refused the access key while its webhook subscriptions were made; connect again with a new one"
					return nil
				}); err == nil {
					c = saved
				}
			}
			return c, keyRefusal(subscribed)
		}
	}
	// Saved before the attempt is written: an instance that opens the
	// new attempt reads the new key.
	state := m.d.Upstream.StateStore()
	if err := state.Save(ctx, SecretKey(c.ID, "access_key"), []byte(accessKey)); err != nil {
		return c, fmt.Errorf("keep the access key: %w", err)
	}
	saved, err := m.write(ctx, c.ID, func(c *connection.Connection) error {
		if c.Status == connection.Disconnected {
			return errConnectionState(*c, "it was disconnected meanwhile")
		}
		if reconnect {
			c.Attempt++
		}
		if subscribed != nil {
			c.Reason = s.Label + "'s webhook subscriptions could not be made; reconnect to try again"
			return nil
		}
		now := m.clock.Now().UTC()
		c.Status, c.Reason, c.Choices = connection.Connected, "", nil
		c.ConnectedAt = &now
		return nil
	})
	if subscribed != nil {
		m.log.Warn("webhook subscriptions not made", zap.String("connection", c.ID), zap.String("system", c.System), zap.Error(subscribed))
		if err == nil {
			c = saved
		}
		return c, subscribed
	}
	return saved, err
}

// subscribe makes the connection's webhook subscriptions, with the
// signing key made for it at its first.
func (m *Manager) subscribe(ctx context.Context, c connection.Connection, s System, sub firmsystem.Subscriber, accessKey string) error {
	state := m.d.Upstream.StateStore()
	signing, err := state.Last(ctx, SecretKey(c.ID, "webhook_key"))
	if err != nil {
		return fmt.Errorf("read the webhook signing key: %w", err)
	}
	if len(signing) == 0 {
		// Vendors take letters, digits, dashes and underscores (Karbon),
		// and the adapters' checks use the key's bytes as they are: 32
		// random bytes in base64url are both.
		signing = []byte(randomToken(32))
		if err := state.Save(ctx, SecretKey(c.ID, "webhook_key"), signing); err != nil {
			return fmt.Errorf("keep the webhook signing key: %w", err)
		}
	}
	_, err = sub.Subscribe(ctx, m.vendorDeps(), c.Role, accessKey, m.webhookTarget(c), string(signing))
	return err
}

// webhookTarget is the address of c's own webhook subscriptions.
func (m *Manager) webhookTarget(c connection.Connection) string {
	return m.cfg.PublicURL + WebhookPath + c.System + "/" + c.ID
}

// SubscriptionCheck is how often Run checks the vendors' subscriptions:
// a vendor that forgot them (Karbon's, restarted, or ending one after ten
// failed deliveries) sends nothing and says nothing, so a lost one is
// found by asking. Each check is one call a subscription (three for a
// Karbon records connection, under 900 a day against Karbon's 120 a
// minute); meanwhile the syncs' polls keep every kind it fed current.
const SubscriptionCheck = 5 * time.Minute

// Run checks, every SubscriptionCheck until ctx ends, the webhook
// subscriptions of every connected connection whose app manages them
// (CheckSubscriptions).
func (m *Manager) Run(ctx context.Context) error {
	for {
		if err := m.CheckSubscriptions(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("webhook subscriptions not checked; checked again shortly", zap.Duration("in", SubscriptionCheck), zap.Error(err))
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
// instance at a time makes it: the subscriptions a vendor cancelled are
// made again for each connected connection whose app manages them, and a
// connection whose access key the vendor refuses needs reconnecting.
func (m *Manager) CheckSubscriptions(ctx context.Context) error {
	if !m.subscribes() {
		return nil
	}
	if locks := m.d.Upstream.Locks; locks != nil {
		const name = "connect/webhook-subscriptions"
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
		if c.Status != connection.Connected {
			continue
		}
		s, ok := Lookup(c.Role, c.System)
		sub, subscribes := m.cfg.app(s.App).(firmsystem.Subscriber)
		if !ok || !subscribes {
			continue
		}
		if err := m.checkConnection(ctx, c, s, sub); err != nil {
			failed = errors.Join(failed, fmt.Errorf("%s: %w", c.ID, err))
		}
	}
	return failed
}

// subscribes reports whether a registered app manages webhook
// subscriptions.
func (m *Manager) subscribes() bool {
	if m.cfg == nil {
		return false
	}
	for _, app := range m.cfg.apps {
		if _, ok := app.(firmsystem.Subscriber); ok {
			return true
		}
	}
	return false
}

func (m *Manager) checkConnection(ctx context.Context, c connection.Connection, s System, sub firmsystem.Subscriber) error {
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
	var made []string
	if len(key) > 0 {
		made, err = sub.Subscribe(ctx, m.vendorDeps(), c.Role, string(key), m.webhookTarget(c), string(signing))
	}
	for _, kind := range made {
		m.log.Info("webhook subscription made again: the vendor had ended it", zap.String("connection", c.ID),
			zap.String("firm", c.Firm), zap.String("system", c.System), zap.String("type", kind))
	}
	reason := s.Label + " no longer accepts this connection's access key; reconnect it with a new one."
	if len(key) == 0 {
		return m.needsReconnect(ctx, c.ID, reason)
	}
	var refused *firmsystem.RefusedError
	if errors.As(err, &refused) {
		// Confirmed by a second call, so that one glitch does not pause
		// the connection.
		app := m.keyApp(s)
		if app == nil {
			return err
		}
		checked := app.CheckKey(ctx, m.vendorDeps(), string(key))
		if !errors.As(checked, &refused) {
			return errors.Join(err, checked)
		}
		return m.needsReconnect(ctx, c.ID, reason)
	}
	return err
}
