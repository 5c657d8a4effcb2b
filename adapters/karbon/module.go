package karbon

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

func init() {
	caddy.RegisterModule(Module{})
	caddy.RegisterModule(Ledger{})
}

// Module is Karbon as a firm's records system:
//
//	records karbon {
//	    access_key {env.KARBON_ACCESS_KEY}
//	    bearer {env.KARBON_BEARER}
//	    stage_map "Waiting on client" awaiting_client
//	    ...
//	}
//
// Its options are Config's fields by their JSON names. Its invoices
// (Karbon's billing) are the firm's ledger when the firm names no other.
type Module struct {
	Config
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  caddy.ModuleID(firmsystem.Namespace("records") + ".karbon"),
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

// UnmarshalCaddyfile reads the `records karbon { ... }` block.
func (m *Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return firmsystem.UnmarshalCaddyfile(d, &m.Config)
}

// Open connects the firm to its Karbon practice.
func (m *Module) Open(d firmsystem.Deps) (firmsystem.Opened, error) {
	cfg := m.Config
	cfg.Firm = d.Firm
	opts := []Option{InRole("records")}
	if d.KeepsLedger {
		opts = append(opts, AsLedger())
	}
	k, err := New(cfg, d.Upstream, opts...)
	if err != nil {
		return firmsystem.Opened{}, err
	}
	opened := firmsystem.Opened{Label: "Karbon", Reader: k, Clients: k, Jobs: k, Stages: k, Client: k.Upstream(), Webhook: k.Webhook(d.Upstream.Changes)}
	if d.KeepsLedger {
		opened.Ledger = k
	}
	return opened, nil
}

// Ledger is Karbon's billing as a firm's ledger, beside another records
// system or with Karbon's own records:
//
//	ledger karbon {
//	    access_key {env.KARBON_ACCESS_KEY}
//	    bearer {env.KARBON_BEARER}
//	    settlement_rail "Other" bank_transfer
//	    ...
//	}
//
// Its options are Config's fields by their JSON names, and link_clients;
// with records karbon it spends the same access key's allowance.
type Ledger struct {
	Config
	// LinkClients is "off" when invoices name no client; by default
	// ("records") their client is the firm's records system's for the
	// billed client (linking's rule: the Karbon client itself when the
	// records system is the same Karbon practice), else null.
	LinkClients string `json:"link_clients,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Ledger) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  caddy.ModuleID(firmsystem.Namespace("ledger") + ".karbon"),
		New: func() caddy.Module { return new(Ledger) },
	}
}

// Provision reads the configuration's placeholders ({env.X}, {file.X}).
func (m *Ledger) Provision(caddy.Context) error {
	firmsystem.Expand(&m.Config)
	return nil
}

// Validate checks the configuration as New would use it.
func (m *Ledger) Validate() error {
	if _, err := firmsystem.Linked(m.LinkClients); err != nil {
		return err
	}
	_, err := New(m.Config, upstream.Deps{})
	return err
}

// UnmarshalCaddyfile reads the `ledger karbon { ... }` block.
func (m *Ledger) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return firmsystem.UnmarshalCaddyfile(d, m)
}

// Open connects the firm to its Karbon billing.
func (m *Ledger) Open(d firmsystem.Deps) (firmsystem.Opened, error) {
	cfg := m.Config
	cfg.Firm = d.Firm
	opts := []Option{AsLedger(), InRole("ledger")}
	if l := firmsystem.Linker(d, m.LinkClients); l != nil {
		opts = append(opts, WithClientLinker(l))
	}
	k, err := New(cfg, d.Upstream, opts...)
	if err != nil {
		return firmsystem.Opened{}, err
	}
	return firmsystem.Opened{Label: "Karbon", Reader: k, Customers: "billed clients", Client: k.Upstream(),
		Webhook: k.Webhook(d.Upstream.Changes)}, nil
}

// Interface guards
var (
	_ firmsystem.Module     = (*Module)(nil)
	_ caddy.Provisioner     = (*Module)(nil)
	_ caddy.Validator       = (*Module)(nil)
	_ caddyfile.Unmarshaler = (*Module)(nil)
	_ firmsystem.Module     = (*Ledger)(nil)
	_ caddy.Provisioner     = (*Ledger)(nil)
	_ caddy.Validator       = (*Ledger)(nil)
	_ caddyfile.Unmarshaler = (*Ledger)(nil)
)
