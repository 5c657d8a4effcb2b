package quickbooks_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/practicegw/practicegw/adapters/quickbooks"
)

// The block of config/README.md reads into the module's JSON, and
// validation refuses what cannot work.
func TestCaddyfileBlock(t *testing.T) {
	block := `quickbooks {
		realm_id 9130357992221046
		client_id ABc
		client_secret s3cr3t
		refresh_token RT1
		token_url https://oauth.platform.intuit.com/oauth2/v1/tokens/bearer
		base_url https://sandbox-quickbooks.api.intuit.com
		verifier_token vt
		settlement_rail "Stripe" stripe
		settlement_rail "Square" card
		link_clients records
	}`
	var m quickbooks.Module
	if err := m.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block)); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(m)
	want := `{"realm_id":"9130357992221046","oauth2":{"token_url":"https://oauth.platform.intuit.com/oauth2/v1/tokens/bearer",` +
		`"client_id":"ABc","client_secret":"s3cr3t","refresh_token":"RT1"},"base_url":"https://sandbox-quickbooks.api.intuit.com",` +
		`"verifier_token":"vt","settlement_rails":{"Square":"card","Stripe":"stripe"},"link_clients":"records"}`
	if string(got) != want {
		t.Errorf("adapted\n%s\nwant\n%s", got, want)
	}
	if err := m.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if info, err := caddy.GetModule("practicegw.systems.ledger.quickbooks"); err != nil || info.New() == nil {
		t.Errorf("module not registered: %v", err)
	}
	for block, want := range map[string]string{
		"quickbooks {\nclient_id c\nclient_secret s\n}":                            "realm_id is required",
		"quickbooks {\nrealm_id 1\n}":                                              "client_id",
		"quickbooks {\nrealm_id 1\naccess_token a\nlink_clients ledger\n}":         `link_clients "ledger"`,
		"quickbooks {\nrealm_id 1\naccess_token a\nsettlement_rail \"\" stripe\n}": "settlement_rails",
	} {
		var m quickbooks.Module
		if err := m.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block)); err != nil {
			t.Fatal(err)
		}
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: Validate() = %v, want %q", block, err, want)
		}
	}
}
