package connect

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// UnmarshalCaddyfile reads the `connect` block of the practicegw global
// option, the dispenser on its name. Syntax:
//
//	connect {
//	    public_url <https://gw.example.com>
//	    xero|sharepoint|google_drive|dropbox {
//	        client_id       <id>
//	        client_secret   <secret>
//	        authorize_url   <url>
//	        token_url       <url>
//	        revoke_url      <url>
//	        connections_url <url>
//	        base_url        <url>
//	        scopes          <scope> [<scope>...]
//	        webhook_key     <key>
//	    }
//	    karbon {
//	        bearer   <application bearer token>
//	        base_url <url>
//	    }
//	}
//
// Secrets are usually placeholders, {env.X} or {file.X}, read when the app
// is provisioned; an endpoint left out is the vendor's published one.
func (c *Config) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch opt := d.Val(); opt {
		case "public_url":
			if !d.Args(&c.PublicURL) || d.NextArg() {
				return d.ArgErr()
			}
		case "xero", "sharepoint", "google_drive", "dropbox":
			app := new(OAuthApp)
			if err := unmarshalOAuthApp(d, app); err != nil {
				return err
			}
			switch opt {
			case "xero":
				c.Xero = app
			case "sharepoint":
				c.SharePoint = app
			case "google_drive":
				c.GoogleDrive = app
			case "dropbox":
				c.Dropbox = app
			}
		case "karbon":
			c.Karbon = new(KarbonApp)
			if err := unmarshalKarbonApp(d, c.Karbon); err != nil {
				return err
			}
		default:
			return d.Errf("unknown connect option %q", opt)
		}
	}
	return nil
}

func unmarshalOAuthApp(d *caddyfile.Dispenser, app *OAuthApp) error {
	name := d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	fields := map[string]*string{
		"client_id": &app.ClientID, "client_secret": &app.ClientSecret,
		"authorize_url": &app.AuthorizeURL, "token_url": &app.TokenURL, "revoke_url": &app.RevokeURL,
		"connections_url": &app.ConnectionsURL, "base_url": &app.BaseURL, "webhook_key": &app.WebhookKey,
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if opt == "scopes" {
			app.Scopes = d.RemainingArgs()
			if len(app.Scopes) == 0 {
				return d.ArgErr()
			}
			continue
		}
		dst, ok := fields[opt]
		if !ok {
			return d.Errf("unknown connect %s option %q", name, opt)
		}
		if !d.Args(dst) || d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

func unmarshalKarbonApp(d *caddyfile.Dispenser, app *KarbonApp) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var dst *string
		switch opt := d.Val(); opt {
		case "bearer":
			dst = &app.Bearer
		case "base_url":
			dst = &app.BaseURL
		default:
			return d.Errf("unknown connect karbon option %q", opt)
		}
		if !d.Args(dst) || d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}
