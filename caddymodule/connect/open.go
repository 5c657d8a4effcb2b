package connect

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/store/connection"
)

// Secrets reads the connections' secrets where the Manager keeps them
// (the sealed upstream state store).
type Secrets interface {
	// Last is the value saved under key; empty when none is.
	Last(ctx context.Context, key string) ([]byte, error)
}

// ModuleConfig is the configuration of the module connection c opens as,
// as a Caddyfile block would give it: its system's module fills it from
// the operator's app and what the connection holds (its organisation,
// and the secrets read from secrets, where they are sealed).
func (cfg *Config) ModuleConfig(ctx context.Context, secrets Secrets, c connection.Connection) (json.RawMessage, error) {
	s, ok := Lookup(c.Role, c.System)
	if !ok || s.Role != c.Role {
		return nil, fmt.Errorf("no %s system %q to connect", c.Role, c.System)
	}
	app := cfg.app(s.App)
	if app == nil {
		return nil, fmt.Errorf("the connect block has no %s app", s.App)
	}
	info, err := caddy.GetModule(firmsystem.Namespace(s.Role) + "." + s.Name)
	if err != nil {
		return nil, err
	}
	mod, ok := info.New().(firmsystem.Connectable)
	if !ok {
		return nil, fmt.Errorf("%s cannot be connected", s.Name)
	}
	conn := firmsystem.Connection{ID: literal(c.ID), Organisation: literal(c.OrganisationID)}
	if _, ok := app.(firmsystem.AccessKey); ok {
		if conn.AccessKey, err = secret(ctx, secrets, c, "access_key"); err != nil {
			return nil, err
		}
	}
	if _, ok := app.(firmsystem.Subscriber); ok {
		if conn.WebhookKey, err = secret(ctx, secrets, c, "webhook_key"); err != nil {
			return nil, err
		}
	}
	if err := mod.Configure(app, conn); err != nil {
		return nil, err
	}
	return json.Marshal(mod)
}

// secret reads one of c's secrets, escaped; "" when none was saved.
func secret(ctx context.Context, secrets Secrets, c connection.Connection, name string) (string, error) {
	raw, err := secrets.Last(ctx, SecretKey(c.ID, name))
	if err != nil {
		return "", fmt.Errorf("reading the connection's %s: %w", name, err)
	}
	return literal(string(raw)), nil
}

// literal escapes the braces of a value a firm gave (a tenant id, an
// access key) so that the module, which expands placeholders in its
// configuration, takes it as it is: never a {file.…} or {env.…} of the
// gateway's.
func literal(s string) string {
	return strings.NewReplacer(`{`, `\{`, `}`, `\}`).Replace(s)
}
