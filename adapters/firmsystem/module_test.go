package firmsystem_test

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	_ "github.com/practicegw/practicegw/adapters/dropbox"
	_ "github.com/practicegw/practicegw/adapters/google_drive"
	_ "github.com/practicegw/practicegw/adapters/karbon"
	_ "github.com/practicegw/practicegw/adapters/sharepoint"
	_ "github.com/practicegw/practicegw/adapters/xero"
	_ "github.com/practicegw/practicegw/adapters/xpm"
)

// Each system module refuses, at validation, a block that adapts but
// cannot work, and accepts a complete one.
func TestModulesValidate(t *testing.T) {
	for _, tc := range []struct {
		id, block, want string // want "" means valid
	}{
		{"records.karbon", "access_key a\nbearer b", ""},
		{"records.karbon", "access_key a", "access_key and bearer are both required"},
		{"records.karbon", "access_key a\nbearer b\nclient_group_type castle", `client_group_type "castle"`},
		{"ledger.karbon", "access_key a\nbearer b\nsettlement_rail \"Other\" bank_transfer", ""},
		{"ledger.karbon", "bearer b", "access_key and bearer are both required"},
		{"ledger.xero", "tenant_id t\nclient_id c\nclient_secret s\nlink_clients records", ""},
		{"ledger.xero", "client_id c\nclient_secret s", "tenant_id is required"},
		{"ledger.xero", "tenant_id t\nclient_id c\nclient_secret s\nlink_clients ledger", `link_clients "ledger"`},
		{"records.xpm", "tenant_id t\nclient_id c\nclient_secret s\nstage_map \"Awaiting info\" awaiting_client", ""},
		{"records.xpm", "client_id c\nclient_secret s", "tenant_id is required"},
		{"records.xpm", "tenant_id t\nclient_id c\nclient_secret s\nstage_map \"Awaiting info\" waiting", `"waiting" is not one of`},
		{"records.xpm", "tenant_id t\naccess_token a\ntime_zone Mars/Olympus", `time_zone "Mars/Olympus"`},
		{"documents.sharepoint", "tenant_id t\nclient_id c\nclient_secret s\ndrive_id b!d\nlink_clients documents", `link_clients "documents"`},
	} {
		info, err := caddy.GetModule("practicegw.systems." + tc.id)
		if err != nil {
			t.Fatal(err)
		}
		m := info.New()
		d := caddyfile.NewTestDispenser("system {\n" + tc.block + "\n}")
		if err := m.(caddyfile.Unmarshaler).UnmarshalCaddyfile(d); err != nil {
			t.Fatalf("%s {%s}: %v", tc.id, tc.block, err)
		}
		err = m.(caddy.Validator).Validate()
		if tc.want == "" && err != nil {
			t.Errorf("%s {%s}: Validate() = %v, want nil", tc.id, tc.block, err)
		}
		if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s {%s}: Validate() = %v, want an error containing %q", tc.id, tc.block, err, tc.want)
		}
	}
}
