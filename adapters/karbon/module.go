package karbon

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

func init() {
	caddy.RegisterModule(Module{})
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
// Its options are Config's fields by their JSON names.
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
	k, err := New(cfg, d.Upstream)
	if err != nil {
		return firmsystem.Opened{}, err
	}
	return firmsystem.Opened{Label: "Karbon", Reader: k, Clients: k, Jobs: k, Client: k.Upstream(), Webhook: k.Webhook}, nil
}

// Interface guards
var (
	_ firmsystem.Module     = (*Module)(nil)
	_ caddy.Provisioner     = (*Module)(nil)
	_ caddy.Validator       = (*Module)(nil)
	_ caddyfile.Unmarshaler = (*Module)(nil)
)
