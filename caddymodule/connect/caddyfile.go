package connect

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/practicegw/practicegw/adapters/firmsystem"
)

// UnmarshalCaddyfile reads the `connect` block of the practicegw global
// option, the dispenser on its name. Syntax:
//
//	connect {
//	    public_url <https://gw.example.com>
//	    <app> { ... }
//	}
//
// Each <app> block is read by the vendor app of that name (a guest module
// in firmsystem.ConnectNamespace): xero, sharepoint, google_drive and
// dropbox take firmsystem.OAuthApp's options, karbon its bearer. Secrets
// are usually placeholders, {env.X} or {file.X}, read when the app is
// provisioned; an endpoint left out is the vendor's published one.
func (c *Config) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if opt == "public_url" {
			if !d.Args(&c.PublicURL) || d.NextArg() {
				return d.ArgErr()
			}
			continue
		}
		if _, err := caddy.GetModule(firmsystem.ConnectNamespace + "." + opt); err != nil {
			return d.Errf("unknown connect option %q", opt)
		}
		for _, a := range c.Apps {
			if a.Name == opt {
				return d.Errf("connect: %s twice", opt)
			}
		}
		app, err := caddyfile.UnmarshalModule(d, firmsystem.ConnectNamespace+"."+opt)
		if err != nil {
			return err
		}
		c.Apps = append(c.Apps, AppConfig{Name: opt, Raw: caddyconfig.JSON(app, nil)})
	}
	return nil
}
