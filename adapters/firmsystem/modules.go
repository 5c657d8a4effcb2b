package firmsystem

import "github.com/caddyserver/caddy/v2"

// Roles are the roles a firm's systems play, in the order pages list
// them; records first, since a ledger's invoices may come from a records
// system that keeps them.
var Roles = []string{"records", "ledger", "documents"}

// Registered is a system module this build holds for a role.
type Registered struct {
	Role string
	// Name is the system as the Caddyfile and /v1/connections name it.
	Name string
	// Label is how people name it ("Xero Practice Manager"): its
	// Connects' label, else its name.
	Label string
	// Connects is how a firm connects it, nil when only the Caddyfile
	// can name it (it is not Connectable, or its app is not in the build).
	Connects *Connects
	// Key is true when the firm connects it by giving an access key
	// rather than its consent at the vendor (its app is an AccessKey).
	Key bool
}

// Modules are the system modules registered in this build, by role in
// Roles' order and by name: what the binary knows, whatever a
// configuration names.
func Modules() []Registered {
	var out []Registered
	for _, role := range Roles {
		for _, info := range caddy.GetModules(Namespace(role)) {
			r := Registered{Role: role, Name: info.ID.Name(), Label: info.ID.Name()}
			if c, ok := info.New().(Connectable); ok {
				connects := c.Connects()
				if connects.Label != "" {
					r.Label = connects.Label
				}
				if app, err := caddy.GetModule(ConnectNamespace + "." + connects.App); err == nil {
					r.Connects = &connects
					_, r.Key = app.New().(AccessKey)
				}
			}
			out = append(out, r)
		}
	}
	return out
}
