package googledrive

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/docstore"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

func init() {
	caddy.RegisterModule(Module{})
}

// Module is a Google shared drive or folder as a firm's document store (`documents google_drive { ... }`);
// its options are Config's fields by their JSON names, and link_clients.
type Module struct {
	Config
	// LinkClients is "records" when client folders are looked up in the
	// firm's records system.
	LinkClients string `json:"link_clients,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  caddy.ModuleID(firmsystem.Namespace("documents") + ".google_drive"),
		New: func() caddy.Module { return new(Module) },
	}
}

// Provision reads the configuration's placeholders ({env.X}, {file.X}).
func (m *Module) Provision(caddy.Context) error {
	firmsystem.Expand(&m.Config)
	return nil
}

// Validate checks the configuration as New would use it.
func (m *Module) Validate() error {
	return docstore.Validate(m.LinkClients, func() (*Adapter, error) { return New(m.Config, upstream.Deps{}) })
}

// UnmarshalCaddyfile reads the `documents google_drive { ... }` block.
func (m *Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return firmsystem.UnmarshalCaddyfile(d, m)
}

// Open connects the firm to its documents.
func (m *Module) Open(d firmsystem.Deps) (firmsystem.Opened, error) {
	cfg := m.Config
	cfg.Firm = d.Firm
	if cfg.NotificationURL == "" {
		cfg.NotificationURL = d.WebhookURL
	}
	return docstore.Open("Google Drive", m.LinkClients, d, func(opts ...docstore.Option) (*Adapter, error) { return New(cfg, d.Upstream, opts...) })
}

// Interface guards
var (
	_ firmsystem.Module     = (*Module)(nil)
	_ caddy.Provisioner     = (*Module)(nil)
	_ caddy.Validator       = (*Module)(nil)
	_ caddyfile.Unmarshaler = (*Module)(nil)
)
