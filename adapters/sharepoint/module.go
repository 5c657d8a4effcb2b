package sharepoint

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/docstore"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

func init() {
	caddy.RegisterModule(SharePoint{})
	caddy.RegisterModule(OneDrive{})
}

// SharePoint is a SharePoint document library as a firm's document store
// (`documents sharepoint { ... }`); its options are Config's fields by
// their JSON names, and link_clients.
type SharePoint struct{ module }

// OneDrive is a OneDrive as a firm's document store (`documents onedrive
// { ... }`), configured as SharePoint is.
type OneDrive struct{ module }

// CaddyModule returns the Caddy module information.
func (SharePoint) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  caddy.ModuleID(firmsystem.Namespace("documents") + ".sharepoint"),
		New: func() caddy.Module { return &SharePoint{module{provider: "sharepoint", label: "SharePoint"}} },
	}
}

// CaddyModule returns the Caddy module information.
func (OneDrive) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  caddy.ModuleID(firmsystem.Namespace("documents") + ".onedrive"),
		New: func() caddy.Module { return &OneDrive{module{provider: "onedrive", label: "OneDrive"}} },
	}
}

// module is what the two share: Microsoft Graph under either name.
type module struct {
	Config
	// LinkClients is "records" when client folders are looked up in the
	// firm's records system.
	LinkClients string `json:"link_clients,omitempty"`

	provider string
	// label is how people name it: SharePoint or OneDrive.
	label string
}

// Provision reads the configuration's placeholders ({env.X}, {file.X}).
func (m *module) Provision(caddy.Context) error {
	firmsystem.Expand(&m.Config)
	m.Config.Provider = m.provider
	return nil
}

// Validate checks the configuration as New would use it.
func (m *module) Validate() error {
	return docstore.Validate(m.LinkClients, func() (*Adapter, error) { return New(m.Config, upstream.Deps{}) })
}

// UnmarshalCaddyfile reads the `documents sharepoint|onedrive { ... }`
// block.
func (m *module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return firmsystem.UnmarshalCaddyfile(d, m)
}

// Open connects the firm to its drive.
func (m *module) Open(d firmsystem.Deps) (firmsystem.Opened, error) {
	cfg := m.Config
	cfg.Firm = d.Firm
	if cfg.NotificationURL == "" {
		cfg.NotificationURL = d.WebhookURL
	}
	return docstore.Open(m.label, m.LinkClients, d, func(opts ...docstore.Option) (*Adapter, error) { return New(cfg, d.Upstream, opts...) })
}

// Interface guards
var (
	_ firmsystem.Module     = (*SharePoint)(nil)
	_ firmsystem.Module     = (*OneDrive)(nil)
	_ caddy.Provisioner     = (*SharePoint)(nil)
	_ caddy.Validator       = (*SharePoint)(nil)
	_ caddyfile.Unmarshaler = (*SharePoint)(nil)
)
