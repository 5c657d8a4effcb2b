package karbon

import (
	"context"
	"errors"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the Karbon application firms connect their practice through,
// registered in the connect block:
//
//	connect {
//	    karbon {
//	        bearer   <application bearer token>
//	        base_url <url>
//	    }
//	}
//
// Karbon has no OAuth: a firm gives an access key (Settings > Connected
// Apps), which works with the application's bearer. The gateway makes each
// connection's webhook subscriptions.
type App struct {
	// Bearer is the application's bearer token, a placeholder until
	// provisioned.
	Bearer string `json:"bearer,omitempty"`
	// BaseURL is the API [https://api.karbonhq.com].
	BaseURL string `json:"base_url,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  firmsystem.ConnectNamespace + ".karbon",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision reads the placeholders and defaults the API's address.
func (a *App) Provision(caddy.Context) error {
	repl := caddy.NewReplacer()
	a.Bearer = firmsystem.ExpandValue(repl, a.Bearer)
	if a.BaseURL = firmsystem.ExpandValue(repl, a.BaseURL); a.BaseURL == "" {
		a.BaseURL = "https://api.karbonhq.com"
	}
	return nil
}

// Validate checks the provisioned application.
func (a *App) Validate() error {
	if a.Bearer == "" {
		return fmt.Errorf("connect: karbon needs bearer (the application's bearer token)")
	}
	return nil
}

// UnmarshalCaddyfile reads the `karbon { ... }` block of connect.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var dst *string
		switch opt := d.Val(); opt {
		case "bearer":
			dst = &a.Bearer
		case "base_url":
			dst = &a.BaseURL
		default:
			return d.Errf("unknown connect karbon option %q", opt)
		}
		if !d.Args(dst) || d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

// client is the upstream client of one access key.
func (a *App) client(d upstream.Deps, key string) (*upstream.Client, error) {
	return NewAPIClient(a.BaseURL, a.Bearer, key, d)
}

// refused is what a firm's administrator is told of a key Karbon refuses.
var refused = &firmsystem.RefusedError{Message: "Karbon refused this access key; copy it again from Karbon's Settings > Connected Apps."}

// CheckKey makes Karbon's cheapest call that needs a valid access key.
func (a *App) CheckKey(ctx context.Context, d upstream.Deps, key string) error {
	c, err := a.client(d, key)
	if err != nil {
		return err
	}
	no, err := CheckAccess(ctx, c)
	if no {
		return refused
	}
	return err
}

// Subscribe makes every subscription of the role's SubscriptionTypes that
// Karbon does not hold as it should: none (Karbon ends one after ten failed
// deliveries) or one to another address, which is replaced (Karbon holds
// one subscription per type).
func (a *App) Subscribe(ctx context.Context, d upstream.Deps, role, key, target, signingKey string) ([]string, error) {
	c, err := a.client(d, key)
	if err != nil {
		return nil, err
	}
	var made []string
	for _, typ := range SubscriptionTypes(role) {
		sub, err := SubscriptionOf(ctx, c, typ)
		if err != nil {
			return made, refusal(err)
		}
		if sub != nil && sub.TargetUrl == target && sub.WebhookType == typ {
			continue
		}
		if sub != nil {
			if err := Unsubscribe(ctx, c, typ); err != nil {
				return made, refusal(err)
			}
		}
		if err := Subscribe(ctx, c, typ, target, signingKey); err != nil {
			return made, refusal(err)
		}
		made = append(made, typ)
	}
	return made, nil
}

// Unsubscribe deletes the subscription of every type the gateway makes for
// the role.
func (a *App) Unsubscribe(ctx context.Context, d upstream.Deps, role, key string) error {
	c, err := a.client(d, key)
	if err != nil {
		return err
	}
	var failed error
	for _, typ := range SubscriptionTypes(role) {
		failed = errors.Join(failed, Unsubscribe(ctx, c, typ))
	}
	return failed
}

// refusal is err, or the key's refusal when Karbon refused it.
func refusal(err error) error {
	if Refused(err) {
		return refused
	}
	return err
}

// Connects: a firm connects Karbon as its records system through the
// Karbon application.
func (m *Module) Connects() firmsystem.Connects {
	return firmsystem.Connects{App: "karbon", Label: "Karbon"}
}

// Connects: a firm connects Karbon's billing as its ledger through the
// Karbon application, with the records' access key or another.
func (m *Ledger) Connects() firmsystem.Connects {
	return firmsystem.Connects{App: "karbon", Label: "Karbon"}
}

// Configure fills the ledger module of a connection, as a records one.
func (m *Ledger) Configure(app caddy.Module, c firmsystem.Connection) error {
	var r Module
	if err := r.Configure(app, c); err != nil {
		return err
	}
	m.Config = r.Config
	return nil
}

// Configure fills the module of a connection: its access key with the
// application's bearer, the signing key of its subscriptions (none yet
// refuses every webhook, as the adapter does without a key) and the stage
// map its administrator edited.
func (m *Module) Configure(app caddy.Module, c firmsystem.Connection) error {
	a, ok := app.(*App)
	if !ok {
		return fmt.Errorf("karbon connects through the karbon app, not %T", app)
	}
	m.Config = Config{AccessKey: c.AccessKey, Bearer: a.Bearer, BaseURL: a.BaseURL, WebhookSigningKey: c.WebhookKey, StageMap: c.StageMap}
	return nil
}

// Interface guards
// Remembered are the prefixes of firm's stamps of kinds (its work
// items' and users' modification times, which Karbon does not publish,
// and its invoices', which move with what is read apart from them):
// what a connection's purge forgets, so that the next account's records
// are stamped when first seen there.
func (m *Module) Remembered(firm string, kinds []practice.Kind) []string {
	var out []string
	for _, k := range kinds {
		if k == practice.Jobs || k == practice.People || k == practice.Invoices {
			out = append(out, stamps.Prefix("karbon", firm, k))
		}
	}
	return out
}

// Remembered is the records module's: the ledger's invoices' stamps.
func (l *Ledger) Remembered(firm string, kinds []practice.Kind) []string {
	return (&Module{}).Remembered(firm, kinds)
}

var (
	_ firmsystem.Remembers   = (*Module)(nil)
	_ firmsystem.Remembers   = (*Ledger)(nil)
	_ firmsystem.AccessKey   = (*App)(nil)
	_ firmsystem.Subscriber  = (*App)(nil)
	_ firmsystem.Connectable = (*Module)(nil)
	_ firmsystem.Connectable = (*Ledger)(nil)
	_ caddy.Provisioner      = (*App)(nil)
	_ caddy.Validator        = (*App)(nil)
	_ caddyfile.Unmarshaler  = (*App)(nil)
)
