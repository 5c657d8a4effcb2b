package xpm

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

func init() {
	caddy.RegisterModule(Module{})
}

// Module is Xero Practice Manager as a firm's records system:
//
//	records xpm {
//	    tenant_id {env.XPM_TENANT_ID}
//	    oauth2 { client_id ... client_secret ... }
//	    stage_map "Awaiting info" awaiting_client
//	    ...
//	}
//
// Its options are Config's fields by their JSON names. Its invoices are
// the firm's ledger when the firm configures no other.
type Module struct {
	Config
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  caddy.ModuleID(firmsystem.Namespace("records") + ".xpm"),
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
	_, err := New(m.Config, upstream.Deps{})
	return err
}

// UnmarshalCaddyfile reads the `records xpm { ... }` block.
func (m *Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return firmsystem.UnmarshalCaddyfile(d, &m.Config)
}

// Open connects the firm to its practice in XPM. XPM sends no webhooks:
// changes reach the event pipeline through the synchronizer's polls and
// the adapter's own writes.
func (m *Module) Open(d firmsystem.Deps) (firmsystem.Opened, error) {
	cfg := m.Config
	cfg.Firm = d.Firm
	x, err := New(cfg, d.Upstream)
	if err != nil {
		return firmsystem.Opened{}, err
	}
	return firmsystem.Opened{Label: "Xero Practice Manager", Reader: x, Ledger: x, Engagements: true, Clients: x, Jobs: x, Stages: x, Client: x.Upstream()}, nil
}

// KeepsProposals says the system keeps the firm's proposals.
func (Module) KeepsProposals() bool { return true }

// Interface guards
var (
	_ firmsystem.ProposalKeeper = Module{}
	_ firmsystem.Module         = (*Module)(nil)
	_ caddy.Provisioner         = (*Module)(nil)
	_ caddy.Validator           = (*Module)(nil)
	_ caddyfile.Unmarshaler     = (*Module)(nil)
)
