package dispatcher

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Endpoint statuses.
const (
	EndpointEnabled  = "enabled"
	EndpointDisabled = "disabled"
)

// Endpoint is a URL a firm registered to receive events. Its JSON form is
// the API's; the firm and the secrets never appear in it (the secret is
// shown once, by the calls that create it).
type Endpoint struct {
	ID             string    `json:"id"`
	Firm           string    `json:"-"`
	Sandbox        bool      `json:"sandbox"`
	URL            string    `json:"url"`
	Events         []string  `json:"events"`
	Description    string    `json:"description"`
	Status         string    `json:"status"`
	DisabledReason string    `json:"disabled_reason,omitempty"`
	Secrets        []Secret  `json:"-"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// Secret is a signing key, newest first in Endpoint.Secrets. A rotated-out
// key keeps signing until ExpiresAt so receivers can switch without losing
// a delivery.
type Secret struct {
	Key       string     `json:"key"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// rotationOverlap is how long a replaced secret keeps signing.
const rotationOverlap = 24 * time.Hour

// Tenant is the firm and mode the endpoint belongs to.
func (ep Endpoint) Tenant() practice.Tenant {
	return practice.Tenant{Firm: ep.Firm, Sandbox: ep.Sandbox}
}

// SigningKeys are the keys that sign at now, newest first.
func (ep Endpoint) SigningKeys(now time.Time) []string {
	var keys []string
	for _, s := range ep.Secrets {
		if s.ExpiresAt == nil || now.Before(*s.ExpiresAt) {
			keys = append(keys, s.Key)
		}
	}
	return keys
}

// DeliveryName is the name under which the endpoint receives an event of
// kind, or false if it is not subscribed (KindFilter.DeliveryName).
func (ep Endpoint) DeliveryName(kind string) (string, bool) {
	return KindFilter(ep.Events).DeliveryName(kind)
}

// rotateTo makes s the primary secret and lets the previous ones sign
// until now+rotationOverlap (or their earlier expiry). Expired secrets are
// dropped.
func (ep *Endpoint) rotateTo(s Secret, now time.Time) {
	until := now.Add(rotationOverlap)
	kept := []Secret{s}
	for _, old := range ep.Secrets {
		if old.ExpiresAt != nil && !now.Before(*old.ExpiresAt) {
			continue
		}
		if old.ExpiresAt == nil || old.ExpiresAt.After(until) {
			old.ExpiresAt = &until
		}
		kept = append(kept, old)
	}
	ep.Secrets = kept
}

// newSecret draws 32 random bytes: the HMAC-SHA256 block of key material,
// inside the 24 to 64 bytes Standard Webhooks asks for.
func newSecret() (Secret, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Secret{}, fmt.Errorf("generate secret: %w", err)
	}
	return Secret{Key: secretPrefix + base64.StdEncoding.EncodeToString(b[:])}, nil
}

// NewSigningSecret draws a secret as an endpoint gets one, "whsec_<base64>".
func NewSigningSecret() (string, error) {
	s, err := newSecret()
	return s.Key, err
}

// Limits on what an endpoint may hold.
const (
	maxURLLength         = 2048
	maxDescriptionLength = 500
)

// ValidateURL checks a webhook URL for registration: absolute http(s), no
// credentials, at most 2048 characters, and a host the policy allows.
// Errors are *practice.InvalidError for the url parameter.
func ValidateURL(ctx context.Context, policy *AddressPolicy, raw string) error {
	if raw == "" {
		return practice.Missing("url")
	}
	if len(raw) > maxURLLength {
		return practice.Invalid("url", "The url must be at most %d characters.", maxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return practice.Invalid("url", "The url must be an absolute http or https URL.")
	}
	if u.User != nil {
		return practice.Invalid("url", "The url must not contain a user name or password; authenticate with the webhook signature.")
	}
	if err := policy.CheckHost(ctx, u.Hostname()); err != nil {
		var blocked *BlockedAddressError
		if errors.As(err, &blocked) && blocked.Range.IsValid() {
			return practice.Invalid("url", "The url is not allowed: %v; %s.", err, waysOut(blocked, raw))
		}
		return practice.Invalid("url", "The url is not allowed: %v.", err)
	}
	return nil
}

// waysOut says how a receiver at a blocked address gets webhooks after
// all: on this machine, practicegw listen forwards them to it; anywhere,
// the gateway's allow-list can name its range.
func waysOut(blocked *BlockedAddressError, raw string) string {
	allow := blocked.Range.String()
	if blocked.Addr.Unmap().IsLoopback() {
		allow = "127.0.0.0/8,::1/128"
		return fmt.Sprintf("for a receiver on this machine, run `practicegw listen --forward-to %s`, "+
			"or start the gateway with PRACTICEGW_WEBHOOK_ALLOW_CIDRS=%s", raw, allow)
	}
	return fmt.Sprintf("for a receiver in your own network, start the gateway with PRACTICEGW_WEBHOOK_ALLOW_CIDRS=%s, "+
		"or forward to it with `practicegw listen --forward-to %s`", allow, raw)
}

// validateEvents checks a subscription list and returns it without
// duplicates, in the order given.
func validateEvents(events []string) ([]string, error) {
	if len(events) == 0 {
		return nil, practice.Missing("events")
	}
	var out []string
	for _, e := range events {
		if e != AllEvents && e != EngagementLetterSign && !isKind(e) {
			return nil, practice.Invalid("events", "%q is not an event kind; use \"*\" or any of %v or %q.",
				e, Kinds(), EngagementLetterSign)
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

func validateDescription(d string) error {
	if len(d) > maxDescriptionLength {
		return practice.Invalid("description", "The description must be at most %d characters.", maxDescriptionLength)
	}
	return nil
}
