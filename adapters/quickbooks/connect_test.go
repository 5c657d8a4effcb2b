package quickbooks_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/quickbooks"
	"github.com/practicegw/practicegw/adapters/vendortest"
)

// The connect block's Intuit app: its options, Intuit's endpoints and
// scope by default, the company from the consent's callback, webhooks
// routed by company under the verifier token, and the module a
// connection opens as.
func TestConnectApp(t *testing.T) {
	var a quickbooks.App
	block := "quickbooks {\nclient_id ABc\nclient_secret s3cr3t\nverifier_token vt\n}"
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block)); err != nil {
		t.Fatal(err)
	}
	if err := a.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	c := a.OAuth("quickbooks").Config
	if c.Endpoint.AuthURL != "https://appcenter.intuit.com/connect/oauth2" || c.Endpoint.TokenURL != quickbooks.DefaultTokenURL ||
		len(c.Scopes) != 1 || c.Scopes[0] != quickbooks.Scope || a.RevokeURL != "https://developer.api.intuit.com/v2/oauth2/tokens/revoke" {
		t.Fatalf("the app's client: %+v, revoke %s", c, a.RevokeURL)
	}
	if err := (&quickbooks.App{}).UnmarshalCaddyfile(caddyfile.NewTestDispenser("quickbooks {\nwebhook_secret x\n}")); err == nil {
		t.Error("an unknown option was taken")
	}

	if orgs, _ := a.CallbackOrganisations(context.Background(), firmsystemDeps(), "quickbooks", "at", url.Values{"realmId": {"../1"}}); len(orgs) != 0 {
		t.Errorf("a realmId that is not Intuit's: %v", orgs)
	}

	body := vendortest.QuickBooksLegacy("111", vendortest.QBEvent{Entity: "Invoice", ID: "1", Operation: "Update", At: time.Now()})
	cloud := vendortest.QuickBooksCloudEvents("222", vendortest.QBEvent{Entity: "Invoice", ID: "1", Operation: "Create", At: time.Now()},
		vendortest.QBEvent{Entity: "Payment", ID: "2", Operation: "Create", At: time.Now()})
	for raw, want := range map[string]string{string(body): "111", string(cloud): "222"} {
		realms, err := a.Route(http.Header{"Intuit-Signature": {vendortest.SignQuickBooks("vt", []byte(raw))}}, []byte(raw))
		if err != nil || len(realms) != 1 || realms[0] != want {
			t.Errorf("routed %v %v, want %s", realms, err, want)
		}
	}
	if _, err := a.Route(http.Header{"Intuit-Signature": {vendortest.SignQuickBooks("other", body)}}, body); !errors.Is(err, firmsystem.ErrUnsigned) {
		t.Errorf("a forged delivery: %v", err)
	}

	var m quickbooks.Module
	if got := m.Connects(); got.App != "quickbooks" || !got.Chooses {
		t.Errorf("connects %+v", got)
	}
	if err := m.Configure(&a, firmsystem.Connection{ID: "con_1", Organisation: "9130357992221046"}); err != nil {
		t.Fatal(err)
	}
	if m.RealmID != "9130357992221046" || m.OAuth2.Connection != "con_1" || m.VerifierToken != "vt" || m.Validate() != nil {
		t.Errorf("configured %+v: %v", m.Config, m.Validate())
	}
}

func firmsystemDeps() upstream.Deps { return upstream.Deps{} }

// The company a consent's callback names is believed only as QuickBooks
// confirms it for the new grant's token (its CompanyInfo, which names
// it); one the token does not reach, as when the realmId was changed on
// its way through the browser, is ErrNotReached; a token QuickBooks does
// not take, the same.
func TestCallbackCompanyIsTheOneTheGrantReaches(t *testing.T) {
	q := vendortest.StartQuickBooks(t)
	a := quickbooks.App{OAuthApp: firmsystem.OAuthApp{ClientID: "c", ClientSecret: "s", BaseURL: q.URL}}
	ctx := context.Background()
	orgs, err := a.CallbackOrganisations(ctx, firmsystemDeps(), "quickbooks", q.Token,
		url.Values{"code": {"c"}, "state": {"s"}, "realmId": {q.RealmID}})
	if err != nil || len(orgs) != 1 || orgs[0].ID != q.RealmID || orgs[0].Name != "Birch Street CPAs" {
		t.Fatalf("the callback's company: %v %v", orgs, err)
	}
	for name, tc := range map[string]struct{ token, realm string }{
		"another company":   {q.Token, "4620816365214937"},
		"a token not taken": {"not-a-token", q.RealmID},
	} {
		if orgs, err := a.CallbackOrganisations(ctx, firmsystemDeps(), "quickbooks", tc.token,
			url.Values{"realmId": {tc.realm}}); !errors.Is(err, firmsystem.ErrNotReached) || len(orgs) != 0 {
			t.Errorf("%s: %v %v, want ErrNotReached", name, orgs, err)
		}
	}
	want := "GET /v3/company/" + q.RealmID + "/companyinfo/" + q.RealmID + "?minorversion=75"
	if got := q.Requests(); len(got) != 1 || got[0] != want {
		t.Errorf("asked %v, want %s", got, want)
	}
}
