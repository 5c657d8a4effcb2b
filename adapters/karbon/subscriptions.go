package karbon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// What a firm's connection made through /v1/connections asks of Karbon
// besides its records: that an access key works, and the webhook
// subscriptions (POST, GET and DELETE /v3/WebhookSubscriptions, as
// Karbon's published description defines them) that keep the read model
// current. Each is one call over a client NewAPIClient makes.

// SubscriptionTypes are the WebhookTypes the gateway subscribes to for a
// Karbon connected in role: work items, contacts (with organisations and
// client groups) and users for the records; invoices for the ledger
// (Karbon's billing). Karbon keeps one subscription per type and access
// key, so a firm's records and ledger on one key never take each other's.
func SubscriptionTypes(role string) []string {
	switch role {
	case "records":
		return []string{"Work", "Contact", "User"}
	case "ledger":
		return []string{"Invoice"}
	}
	return nil
}

// Subscription is one webhook subscription, as Karbon shows it.
type Subscription struct {
	TargetUrl   string
	WebhookType string
}

// NewAPIClient is the upstream client of one firm's Karbon: the
// application's bearer and the firm's access key, under Karbon's
// published rate limit.
func NewAPIClient(baseURL, bearer, accessKey string, d upstream.Deps) (*upstream.Client, error) {
	if baseURL == "" {
		baseURL = "https://api.karbonhq.com"
	}
	return upstream.NewClient(upstream.Options{
		System:   "karbon",
		BaseURL:  baseURL,
		Defaults: upstream.Policy{RateLimit: 120, RatePeriod: upstream.Duration(time.Minute)},
		Auth:     upstream.Headers{"Authorization": "Bearer " + bearer, "AccessKey": accessKey},
		Account:  accessKey,
	}, d)
}

// CheckAccess makes the cheapest call Karbon publishes that needs a valid
// access key (one user), and reports whether Karbon refused the key:
// refused is true for a 401 or 403, err any other failure.
func CheckAccess(ctx context.Context, c *upstream.Client) (refused bool, err error) {
	_, err = c.Do(ctx, upstream.Request{Path: "/v3/Users", Query: url.Values{"$top": {"1"}}})
	if Refused(err) {
		return true, nil
	}
	return false, err
}

// Refused reports whether err is Karbon refusing the credentials.
func Refused(err error) bool {
	var s *practice.StatusError
	return errors.As(err, &s) && (s.Status == http.StatusUnauthorized || s.Status == http.StatusForbidden)
}

// Subscribe creates the subscription of webhookType, delivered to target
// and signed with signingKey (letters, digits, dashes and underscores, at
// least 16 of them, as Karbon requires).
func Subscribe(ctx context.Context, c *upstream.Client, webhookType, target, signingKey string) error {
	body, err := json.Marshal(struct {
		TargetUrl   string
		WebhookType string
		SigningKey  string
	}{target, webhookType, signingKey})
	if err != nil {
		return err
	}
	if _, err := c.Do(ctx, upstream.Request{Method: http.MethodPost, Path: "/v3/WebhookSubscriptions", Body: body}); err != nil {
		return fmt.Errorf("karbon: subscribe to %s webhooks: %w", webhookType, err)
	}
	return nil
}

// SubscriptionOf returns the subscription of webhookType; nil when there
// is none (Karbon ends one after ten failed deliveries).
func SubscriptionOf(ctx context.Context, c *upstream.Client, webhookType string) (*Subscription, error) {
	var s Subscription
	_, err := c.JSON(ctx, upstream.Request{Path: "/v3/WebhookSubscriptions/" + webhookType}, "webhook subscription", &s)
	if errors.Is(err, practice.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("karbon: %s webhook subscription: %w", webhookType, err)
	}
	return &s, nil
}

// Unsubscribe deletes the subscription of webhookType; none is not an
// error.
func Unsubscribe(ctx context.Context, c *upstream.Client, webhookType string) error {
	_, err := c.Do(ctx, upstream.Request{Method: http.MethodDelete, Path: "/v3/WebhookSubscriptions/" + webhookType})
	if err != nil && !errors.Is(err, practice.ErrNotFound) {
		return fmt.Errorf("karbon: delete the %s webhook subscription: %w", webhookType, err)
	}
	return nil
}
