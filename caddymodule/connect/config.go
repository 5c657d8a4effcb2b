// Package connect lets a firm's administrator connect the firm's own
// systems (POST /v1/connections, the console's Systems page, practicegw
// connect) instead of a platform engineer editing the Caddyfile: the
// OAuth2 consent flow with PKCE and its callback, the choice of the vendor
// organisation, access keys and the webhook subscriptions the gateway
// makes for them, revocation on disconnect. The vendor apps a connection
// goes through are registered once by the operator, in the `connect`
// block of the practicegw global option (Config); each app, and each
// system that can be connected, is a guest module of its vendor's package
// (adapters/firmsystem): this package names no vendor.
package connect

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/adapters/firmsystem"
)

// Config is the `connect` block: where the gateway is reached and the
// vendor apps firms connect through. Its JSON is one object: public_url
// and each app by its name in firmsystem.ConnectNamespace, in the order
// written ({"public_url": ..., "xero": {...}, "karbon": {...}}).
type Config struct {
	// PublicURL is where browsers and vendors reach the gateway; the
	// consent callback is {public_url}/connect/callback.
	PublicURL string
	// Apps are the vendor apps' configurations, each its module's JSON.
	Apps []AppConfig

	// apps are the apps provisioned, by name.
	apps map[string]caddy.Module
}

// AppConfig is one vendor app of the connect block.
type AppConfig struct {
	// Name is the app's module name in firmsystem.ConnectNamespace.
	Name string
	Raw  json.RawMessage
}

// SecretKey is the upstream state key (sealed there) of one of a
// connection's secrets: "access_key" (an access key system's),
// "webhook_key" (the signing key of the subscriptions the gateway made).
func SecretKey(connection, name string) string { return "connection/" + connection + "/" + name }

// MarshalJSON writes public_url, then each app in its order.
func (c Config) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	put := func(name string, v []byte) {
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	if c.PublicURL != "" {
		v, err := json.Marshal(c.PublicURL)
		if err != nil {
			return nil, err
		}
		put("public_url", v)
	}
	for _, a := range c.Apps {
		raw := a.Raw
		if len(raw) == 0 {
			raw = json.RawMessage("{}")
		}
		put(a.Name, raw)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads public_url and every other member as an app,
// keeping their order; into a Config that has apps already (the app's
// configuration read again after the environment's defaults, which pass
// through a map), the apps it had keep theirs. Each app's members are put
// in its module's order, so that `practicegw adapt` writes them as the
// Caddyfile does.
func (c *Config) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("connect: want an object")
	}
	before := c.Apps
	*c = Config{}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		name, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("connect: %s: %w", name, err)
		}
		if seen[name] {
			return fmt.Errorf("connect: %s twice", name)
		}
		seen[name] = true
		if name == "public_url" {
			if err := json.Unmarshal(raw, &c.PublicURL); err != nil {
				return fmt.Errorf("connect: public_url: %w", err)
			}
			continue
		}
		c.Apps = append(c.Apps, AppConfig{Name: name, Raw: inModuleOrder(name, raw)})
	}
	if _, err := dec.Token(); err != nil {
		return err
	}
	slices.SortStableFunc(c.Apps, func(x, y AppConfig) int {
		return cmp.Compare(position(before, x.Name), position(before, y.Name))
	})
	return nil
}

// position is where app name stood in apps; after them all when it did
// not.
func position(apps []AppConfig, name string) int {
	for i, a := range apps {
		if a.Name == name {
			return i
		}
	}
	return len(apps)
}

// inModuleOrder is an app's JSON with its members in its module's order;
// as it is when no module of this build reads it, or when its module
// would not take it (Provision then says why).
func inModuleOrder(name string, raw json.RawMessage) json.RawMessage {
	info, err := caddy.GetModule(firmsystem.ConnectNamespace + "." + name)
	if err != nil {
		return raw
	}
	mod := info.New()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(mod); err != nil {
		return raw
	}
	out, err := json.Marshal(mod)
	if err != nil {
		return raw
	}
	return out
}

// Provision expands the placeholders ({env.X}, {file.X}) of public_url
// and loads each vendor app, which reads its own and fills the endpoints
// and scopes left out with the vendor's published ones.
func (c *Config) Provision(ctx caddy.Context) error {
	c.PublicURL = strings.TrimSuffix(firmsystem.ExpandValue(caddy.NewReplacer(), c.PublicURL), "/")
	c.apps = map[string]caddy.Module{}
	for _, a := range c.Apps {
		if _, err := caddy.GetModule(firmsystem.ConnectNamespace + "." + a.Name); err != nil {
			return fmt.Errorf("connect: no vendor app %q is known to this build", a.Name)
		}
		mod, err := ctx.LoadModuleByID(firmsystem.ConnectNamespace+"."+a.Name, a.Raw)
		if err != nil {
			return fmt.Errorf("connect: %s: %w", a.Name, err)
		}
		c.apps[a.Name] = mod.(caddy.Module)
	}
	return nil
}

// Validate checks where the gateway is reached; each app checked itself
// when it was loaded.
func (c *Config) Validate() error {
	u, err := url.Parse(c.PublicURL)
	if c.PublicURL == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("connect: public_url %q must be an absolute http(s) URL without a path, such as https://gw.example.com", c.PublicURL)
	}
	return nil
}

// App is the provisioned app named name; nil when the operator registered
// none.
func (c *Config) App(name string) caddy.Module { return c.app(name) }

func (c *Config) app(name string) caddy.Module {
	if c == nil {
		return nil
	}
	return c.apps[name]
}
