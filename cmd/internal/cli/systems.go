package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/practicegw/practicegw/adapters/firmsystem"
)

// The systems the help names are the binary's registered modules, so
// that a system added to the build is named without anyone editing a
// sentence here.

// roleWords says what each role is to a firm.
var roleWords = map[string]string{
	"records":   "practice management",
	"ledger":    "the ledger",
	"documents": "the document store",
}

// knownSystems lists, a line a role, the systems this build serves
// ("Karbon (karbon)"); connectable alone keeps those a firm can connect
// itself.
func knownSystems(connectable bool) string {
	byRole := map[string][]string{}
	for _, m := range firmsystem.Modules() {
		if connectable && m.Connects == nil {
			continue
		}
		byRole[m.Role] = append(byRole[m.Role], fmt.Sprintf("%s (%s)", m.Label, m.Name))
	}
	var b strings.Builder
	for _, role := range firmsystem.Roles {
		names := byRole[role]
		if len(names) == 0 {
			names = []string{"none in this build"}
		}
		head := fmt.Sprintf("  %-10s ", role)
		names[0] = roleWords[role] + ": " + names[0]
		b.WriteString(head + wrap(names, 78-len(head), strings.Repeat(" ", len(head))) + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// keySystems names the systems a firm connects with an access key.
func keySystems() string {
	var names []string
	for _, m := range firmsystem.Modules() {
		if m.Key && !slices.Contains(names, m.Label) {
			names = append(names, m.Label)
		}
	}
	return strings.Join(names, ", ")
}

// systemNames are the names a firm connects systems by, each role's
// after it ("karbon, xpm (records); xero, ... (ledger)").
func systemNames() string {
	byRole := map[string][]string{}
	for _, m := range firmsystem.Modules() {
		if m.Connects != nil {
			byRole[m.Role] = append(byRole[m.Role], m.Name)
		}
	}
	var parts []string
	for _, role := range firmsystem.Roles {
		if names := byRole[role]; len(names) > 0 {
			parts = append(parts, fmt.Sprintf("%s (%s)", strings.Join(names, ", "), role))
		}
	}
	return strings.Join(parts, "; ")
}

// wrap joins items with commas in lines of at most width columns,
// breaking between items, the lines after the first indented.
func wrap(items []string, width int, indent string) string {
	var b strings.Builder
	line := 0
	for i, item := range items {
		if i < len(items)-1 {
			item += ","
		}
		switch {
		case i == 0:
		case line+1+len(item) > width:
			b.WriteString("\n" + indent)
			line = 0
		default:
			b.WriteString(" ")
			line++
		}
		b.WriteString(item)
		line += len(item)
	}
	return b.String()
}
