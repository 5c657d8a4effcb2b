package xero

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

func init() {
	caddy.RegisterModule(Module{})
}

// Module is Xero as a firm's ledger:
//
//	ledger xero {
//	    tenant_id {env.XERO_TENANT_ID}
//	    oauth2 { client_id ... client_secret ... }
//	    ...
//	}
//
// Its options are Config's fields by their JSON names, and link_clients.
type Module struct {
	Config
	// LinkClients is "off" when invoices and quotes name no client; by
	// default ("records") their client is the firm's records system's
	// for the contact (linking's rule), else null.
	LinkClients string `json:"link_clients,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  caddy.ModuleID(firmsystem.Namespace("ledger") + ".xero"),
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
	if _, err := firmsystem.Linked(m.LinkClients); err != nil {
		return err
	}
	_, err := New(m.Config, upstream.Deps{})
	return err
}

// UnmarshalCaddyfile reads the `ledger xero { ... }` block.
func (m *Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return firmsystem.UnmarshalCaddyfile(d, m)
}

// Open connects the firm to its Xero organisation.
func (m *Module) Open(d firmsystem.Deps) (firmsystem.Opened, error) {
	cfg := m.Config
	cfg.Firm = d.Firm
	var opts []Option
	if l := firmsystem.Linker(d, m.LinkClients); l != nil {
		opts = append(opts, WithClientLinker(l))
	}
	x, err := New(cfg, d.Upstream, opts...)
	if err != nil {
		return firmsystem.Opened{}, err
	}
	return firmsystem.Opened{Label: "Xero", Reader: x, Customers: "contacts", Engagements: true, Client: x.Upstream(), Webhook: x.Webhook(d.Upstream.Changes)}, nil
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
