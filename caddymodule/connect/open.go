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
	// The stage map's keys are the vendor's names, never expanded; its
	// values are stages.
	conn := firmsystem.Connection{ID: literal(c.ID), Organisation: literal(c.OrganisationID), StageMap: c.StageMap}
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

// Modules opens the systems of firms' connections for the firms' runtime
// (firms.Connected): the module each connection opens as, configured by
// the connect block's app (ModuleConfig) with the secrets Secrets keeps,
// loaded in Caddy's context; and the block's apps by name. Config nil is
// a gateway without a connect block: no connection opens.
type Modules struct {
	Config  *Config
	Context caddy.Context
	Secrets Secrets
}

// Module is the module connection c's system opens as, provisioned.
func (m Modules) Module(ctx context.Context, c connection.Connection) (firmsystem.Module, error) {
	raw, err := m.Config.ModuleConfig(ctx, m.Secrets, c)
	if err != nil {
		return nil, err
	}
	val, err := m.Context.LoadModuleByID(firmsystem.Namespace(c.Role)+"."+c.System, raw)
	if err != nil {
		return nil, err
	}
	mod, ok := val.(firmsystem.Module)
	if !ok {
		return nil, fmt.Errorf("module %T is not a firm system", val)
	}
	return mod, nil
}

// App is the connect block's app named name, nil when it registers none.
func (m Modules) App(name string) any {
	if app := m.Config.app(name); app != nil {
		return app
	}
	return nil
}
