package connect

import (
	"github.com/practicegw/practicegw/adapters/firmsystem"
)

// System is a system a firm can connect, as its module declares it.
type System struct {
	// Name is the system as the Caddyfile and /v1/connections name it.
	Name string
	// Role is the role it plays.
	Role string
	firmsystem.Connects
	// Key is true when the firm gives an access key rather than its
	// consent at the vendor.
	Key bool
}

// Roles are the roles a firm connects a system for, in the order pages
// show them.
var Roles = firmsystem.Roles

// Systems are the systems a firm can connect with this build, by role in
// Roles' order and by name: every system module that is Connectable
// through a vendor app module registered under the name it gives. Which
// of them a gateway offers depends on the apps its connect block
// registers (Manager.Offered).
func Systems() []System {
	var out []System
	for _, m := range firmsystem.Modules() {
		if m.Connects == nil {
			continue
		}
		out = append(out, System{Name: m.Name, Role: m.Role, Connects: *m.Connects, Key: m.Key})
	}
	return out
}

// Lookup is the system named name a firm can connect for role.
func Lookup(role, name string) (System, bool) {
	for _, s := range Systems() {
		if s.Role == role && s.Name == name {
			return s, true
		}
	}
	return System{}, false
}

// Label is how people name a system ("Xero Practice Manager"); its name
// when no module declares one.
func Label(name string) string {
	for _, s := range Systems() {
		if s.Name == name && s.Label != "" {
			return s.Label
		}
	}
	return name
}

// OrganisationWord is the vendor's word for what a grant of system (in
// role) reaches, as pages name it: "site", "company", "organisation",
// "account".
func OrganisationWord(role, name string) string {
	s, _ := Lookup(role, name)
	return s.OrganisationWord()
}

// SystemNames are the names of the systems a firm can connect for role.
func SystemNames(role string) []string {
	var out []string
	for _, s := range Systems() {
		if s.Role == role {
			out = append(out, s.Name)
		}
	}
	return out
}

// Registered are the systems of role a firm can connect on this gateway:
// those whose app the operator registered in the connect block.
func (m *Manager) Registered(role string) []string {
	var out []string
	for _, s := range Systems() {
		if s.Role == role && m.cfg.app(s.App) != nil {
			out = append(out, s.Name)
		}
	}
	return out
}
