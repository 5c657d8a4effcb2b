package quickbooks

import (
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/proposals"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

func init() {
	caddy.RegisterModule(Module{})
}

// Module is QuickBooks Online as a firm's ledger:
//
//	ledger quickbooks {
//	    realm_id {env.QBO_REALM_ID}
//	    client_id {env.QBO_CLIENT_ID}
//	    client_secret {env.QBO_CLIENT_SECRET}
//	    refresh_token {env.QBO_REFRESH_TOKEN}
//	    verifier_token {env.QBO_VERIFIER_TOKEN}
//	    settlement_rail "Stripe" stripe
//	}
//
// Its options are Config's fields by their JSON names (the oauth2 ones at
// the top of the block too), and link_clients.
type Module struct {
	Config
	// LinkClients is "off" when invoices and estimates name no client;
	// by default ("records") their client is the firm's records system's
	// for the customer (linking's rule), else null.
	LinkClients string `json:"link_clients,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  caddy.ModuleID(firmsystem.Namespace("ledger") + ".quickbooks"),
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

// UnmarshalCaddyfile reads the `ledger quickbooks { ... }` block.
func (m *Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return firmsystem.UnmarshalCaddyfile(d, m)
}

// Open connects the firm to its QuickBooks company.
func (m *Module) Open(d firmsystem.Deps) (firmsystem.Opened, error) {
	cfg := m.Config
	cfg.Firm = d.Firm
	var opts []Option
	if l := firmsystem.Linker(d, m.LinkClients); l != nil {
		opts = append(opts, WithClientLinker(l))
	}
	if d.KeepsEngagements != nil {
		opts = append(opts, WithEngagements(d.KeepsEngagements))
	}
	a, err := New(cfg, d.Upstream, opts...)
	if err != nil {
		return firmsystem.Opened{}, err
	}
	return firmsystem.Opened{Label: "QuickBooks Online", Reader: a, Engagements: true, Client: a.Upstream(), Webhook: a.Webhook(d.Upstream.Changes)}, nil
}

// KeepsProposals says the system keeps the firm's proposals.
func (Module) KeepsProposals() bool { return true }

// Remembered are the prefixes of firm's engagements' signings and of the
// deletions of its estimates confirmed, when the ledger keeps its
// engagements (its estimates): what a connection's purge forgets.
func (m *Module) Remembered(firm string, kinds []practice.Kind) []string {
	var out []string
	if slices.Contains(kinds, practice.Invoices) {
		// The invoices' stamps.
		out = append(out, stamps.Prefix("quickbooks", firm, practice.Invoices))
	}
	if slices.Contains(kinds, practice.Engagements) {
		out = append(out, proposals.SigningsPrefix(firm), DeletionsPrefix(firm))
	}
	return out
}

// Interface guards
var (
	_ firmsystem.Remembers      = (*Module)(nil)
	_ firmsystem.ProposalKeeper = Module{}
	_ firmsystem.Module         = (*Module)(nil)
	_ caddy.Provisioner         = (*Module)(nil)
	_ caddy.Validator           = (*Module)(nil)
	_ caddyfile.Unmarshaler     = (*Module)(nil)
)
