package connect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/store/connection"
)

// A vendor this package has never heard of, registered the way a vendor's
// package registers its modules: a ledger connected with an access key
// through its app in the connect block. Nothing of the host names it.
func init() {
	caddy.RegisterModule(ledgerlyApp{})
	caddy.RegisterModule(ledgerlyLedger{})
}

// ledgerlyApp is the vendor's app: `connect { ledgerly { region eu } }`.
type ledgerlyApp struct {
	Region string `json:"region,omitempty"`
}

// ledgerlyKey is the one access key the vendor takes.
const ledgerlyKey = "ldg-good-key-{env.HOME}"

func (ledgerlyApp) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: firmsystem.ConnectNamespace + ".ledgerly", New: func() caddy.Module { return new(ledgerlyApp) }}
}

func (a *ledgerlyApp) CheckKey(_ context.Context, _ upstream.Deps, key string) error {
	if key != ledgerlyKey {
		return &firmsystem.RefusedError{Message: "Ledgerly refused this key; make another under Ledgerly's Integrations."}
	}
	return nil
}

// ledgerlyLedger is the vendor's ledger module.
type ledgerlyLedger struct {
	Key    string `json:"key"`
	Region string `json:"region"`
}

func (ledgerlyLedger) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: caddy.ModuleID(firmsystem.Namespace("ledger") + ".ledgerly"),
		New: func() caddy.Module { return new(ledgerlyLedger) }}
}

func (m *ledgerlyLedger) Open(firmsystem.Deps) (firmsystem.Opened, error) {
	return firmsystem.Opened{}, fmt.Errorf("not opened here")
}

func (m *ledgerlyLedger) Connects() firmsystem.Connects {
	return firmsystem.Connects{App: "ledgerly", Label: "Ledgerly"}
}

func (m *ledgerlyLedger) Configure(app caddy.Module, c firmsystem.Connection) error {
	a, ok := app.(*ledgerlyApp)
	if !ok {
		return fmt.Errorf("ledgerly connects through the ledgerly app, not %T", app)
	}
	m.Key, m.Region = c.AccessKey, a.Region
	return nil
}

var (
	_ firmsystem.AccessKey   = (*ledgerlyApp)(nil)
	_ firmsystem.Connectable = (*ledgerlyLedger)(nil)
)

// The systems a firm can connect are the registered modules that say
// how: the vendors' packages this test links, and the one it registers
// itself, each in its role with the grant its app takes.
func TestSystemsAreTheRegisteredModules(t *testing.T) {
	got := map[string]string{}
	for _, s := range connect.Systems() {
		got[s.Role+"/"+s.Name] = fmt.Sprintf("%s %q key=%v chooses=%v", s.App, s.Label, s.Key, s.Chooses)
	}
	want := map[string]string{
		"records/karbon":         `karbon "Karbon" key=true chooses=false`,
		"records/xpm":            `xero "Xero Practice Manager" key=false chooses=true`,
		"ledger/xero":            `xero "Xero" key=false chooses=true`,
		"ledger/karbon":          `karbon "Karbon" key=true chooses=false`,
		"ledger/ledgerly":        `ledgerly "Ledgerly" key=true chooses=false`,
		"documents/sharepoint":   `sharepoint "SharePoint" key=false chooses=true`,
		"documents/onedrive":     `sharepoint "OneDrive" key=false chooses=false`,
		"documents/google_drive": `google_drive "Google Drive" key=false chooses=false`,
		"documents/dropbox":      `dropbox "Dropbox" key=false chooses=false`,
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %s, want %s", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("systems %v, want %v", got, want)
	}
	if names := connect.SystemNames("ledger"); !slices.Equal(names, []string{"karbon", "ledgerly", "xero"}) {
		t.Errorf("the ledger's systems: %v", names)
	}
	if connect.Label("ledgerly") != "Ledgerly" || connect.Label("nothing") != "nothing" {
		t.Error("labels are not the modules'")
	}
}

// A firm connects the new vendor's ledger through its app with no line
// of this package naming it: the key is checked by the app (a refused one
// answered in the app's words, nothing stored), the connection opens as
// the vendor's module configures it, and a gateway whose connect block
// does not register the app refuses it.
func TestANewVendorConnectsThroughItsModules(t *testing.T) {
	h := newHarness(t)
	h.cfg.Apps = append(h.cfg.Apps, connect.AppConfig{Name: "ledgerly", Raw: json.RawMessage(`{"region":"eu"}`)})
	provision(t, h.cfg)
	m := h.manager()

	_, err := m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "ledgerly", AccessKey: "ldg-wrong"})
	e := h.wantAPIError(err, http.StatusBadRequest, "parameter_invalid", "access_key")
	if !strings.Contains(e.Message, "Ledgerly refused this key") {
		t.Errorf("the refusal says %q", e.Message)
	}
	if cs, _ := h.store.Connections(ctx, "frm_a"); len(cs) != 0 {
		t.Fatalf("a refused key left %v", cs)
	}
	_, err = m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "ledgerly"})
	h.wantAPIError(err, http.StatusBadRequest, "parameter_missing", "access_key")
	_, err = m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "ledgerly", AccessKey: "k"})
	h.wantAPIError(err, http.StatusBadRequest, "parameter_invalid", "system")

	const key = ledgerlyKey
	v := h.check(m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "ledgerly", AccessKey: key}))
	if v.Status != connection.Connected || v.SystemName != "Ledgerly" || v.System != "ledgerly" {
		t.Fatalf("connected as %+v", v)
	}
	raw, err := h.cfg.ModuleConfig(ctx, h.state, h.stored(v.ID))
	if err != nil {
		t.Fatal(err)
	}
	// The firm's key reaches the module escaped, so that the module's
	// placeholders leave it as the firm gave it.
	if want := `{"key":"ldg-good-key-\\{env.HOME\\}","region":"eu"}`; string(raw) != want {
		t.Errorf("the module's configuration %s, want %s", raw, want)
	}

	unregistered := &connect.Config{PublicURL: "https://gw.example.com", Apps: h.cfg.Apps[:len(h.cfg.Apps)-1]}
	provision(t, unregistered)
	other := connect.New(unregistered, connect.Deps{Connections: h.store, Authorizations: h.store, Firms: firms{},
		Runtime: h.rt, Upstream: upstream.Deps{State: h.state, Clock: h.clock, Locks: h.locks}})
	_, err = other.Connect(ctx, "frm_b", connection.Request{Role: "ledger", System: "ledgerly", AccessKey: key})
	e = h.wantAPIError(err, http.StatusConflict, "system_not_registered", "system")
	if !strings.Contains(e.Message, "No Ledgerly app") || !strings.Contains(e.Message, "ledgerly { ... }") {
		t.Errorf("the refusal says %q", e.Message)
	}
	if _, err := unregistered.ModuleConfig(ctx, h.state, h.stored(v.ID)); err == nil || !strings.Contains(err.Error(), "no ledgerly app") {
		t.Errorf("a connection whose app left the block opens: %v", err)
	}
}

// Every system a firm can connect opens as a module its namespace takes,
// configured from its app alone.
func TestEveryVendorSystemConfiguresFromItsApp(t *testing.T) {
	h := newHarness(t)
	cctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	for _, s := range connect.Systems() {
		if s.Name == "ledgerly" {
			continue
		}
		c := connection.Connection{ID: "con_" + s.Name, Firm: "frm_a", Role: s.Role, System: s.Name, OrganisationID: "org-1"}
		raw, err := h.cfg.ModuleConfig(ctx, h.state, c)
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if s.Key {
			// An access key system opens with the key the connection keeps.
			if err := h.state.Save(ctx, connect.SecretKey(c.ID, "access_key"), []byte("k-1")); err != nil {
				t.Fatal(err)
			}
			if raw, err = h.cfg.ModuleConfig(ctx, h.state, c); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := cctx.LoadModuleByID(firmsystem.Namespace(s.Role)+"."+s.Name, raw); err != nil {
			t.Errorf("%s's configuration %s is refused by its module: %v", s.Name, raw, err)
		}
	}
}
