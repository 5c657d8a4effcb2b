package vendortest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// identityCase is one vendor double with its identity service, and a
// cheap API call that shows whether a token is taken.
type identityCase struct {
	name  string
	start func(t *testing.T) *Identity
	style oauth2.AuthStyle
	// call makes an API request with tok and answers its status.
	call func(t *testing.T, tok string) int
}

func apiStatus(t *testing.T, method, u, body string, header map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func identityCases() []identityCase {
	var x *Xero
	var xpm *XPM
	var g *Graph
	var gd *GDrive
	var db *Dropbox
	return []identityCase{
		{name: "xero", style: oauth2.AuthStyleInHeader,
			start: func(t *testing.T) *Identity { x = StartXero(t); return x.Identity },
			call: func(t *testing.T, tok string) int {
				return apiStatus(t, "GET", x.URL+"/Invoices", "", map[string]string{"Authorization": "Bearer " + tok, "xero-tenant-id": x.TenantID})
			}},
		{name: "xpm", style: oauth2.AuthStyleInHeader,
			start: func(t *testing.T) *Identity { xpm = StartXPM(t); return xpm.Identity },
			call: func(t *testing.T, tok string) int {
				return apiStatus(t, "GET", xpm.URL+"/v3.1/client.api/list", "", map[string]string{"Authorization": "Bearer " + tok, "xero-tenant-id": xpm.TenantID})
			}},
		{name: "graph", style: oauth2.AuthStyleInParams,
			start: func(t *testing.T) *Identity { g = NewGraph(); t.Cleanup(g.Close); return g.Identity },
			call: func(t *testing.T, tok string) int {
				return apiStatus(t, "GET", g.URL+"/drives/"+g.DriveID+"/root/children", "", map[string]string{"Authorization": "Bearer " + tok})
			}},
		{name: "gdrive", style: oauth2.AuthStyleInParams,
			start: func(t *testing.T) *Identity { gd = NewGDrive(); t.Cleanup(gd.Close); return gd.Identity },
			call: func(t *testing.T, tok string) int {
				return apiStatus(t, "GET", gd.URL+"/changes/startPageToken", "", map[string]string{"Authorization": "Bearer " + tok})
			}},
		{name: "dropbox", style: oauth2.AuthStyleInParams,
			start: func(t *testing.T) *Identity { db = NewDropbox(); t.Cleanup(db.Close); return db.Identity },
			call: func(t *testing.T, tok string) int {
				return apiStatus(t, "POST", db.URL+"/2/files/list_folder", `{"path":""}`,
					map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
			}},
	}
}

const testRedirect = "https://gw.example.com/connect/callback"

func oauthConfig(id *Identity, style oauth2.AuthStyle) *oauth2.Config {
	return &oauth2.Config{ClientID: id.ClientID, ClientSecret: id.ClientSecret, RedirectURL: testRedirect,
		Scopes:   []string{"offline_access", "files.read", "practicemanager.read"},
		Endpoint: oauth2.Endpoint{AuthURL: id.AuthorizeURL(), TokenURL: id.TokenURL(), AuthStyle: style}}
}

// consentFor runs a consent through the page and exchanges its code.
func consentFor(t *testing.T, id *Identity, conf *oauth2.Config) *oauth2.Token {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	back, err := id.Allow(conf.AuthCodeURL("st-1", oauth2.S256ChallengeOption(verifier)))
	if err != nil {
		t.Fatal(err)
	}
	if back.Query().Get("state") != "st-1" || back.Query().Get("code") == "" {
		t.Fatalf("redirect %s: want the state and a code", back)
	}
	tok, err := conf.Exchange(context.Background(), back.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func grantError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

// Every OAuth2 vendor double gives consent through its page, exchanges
// the code once with the PKCE verifier, and its API takes the access
// token it issued; a refused consent, a replayed code, a wrong verifier,
// a wrong redirect URI and a wrong client are refused as OAuth2 says.
func TestIdentityConsentAndCode(t *testing.T) {
	for _, c := range identityCases() {
		t.Run(c.name, func(t *testing.T) {
			id := c.start(t)
			id.AllowRedirect(testRedirect)
			conf := oauthConfig(id, c.style)
			ctx := context.Background()

			page, err := http.Get(conf.AuthCodeURL("st-1", oauth2.S256ChallengeOption("v")))
			if err != nil {
				t.Fatal(err)
			}
			html, _ := io.ReadAll(page.Body)
			page.Body.Close()
			if page.StatusCode != http.StatusOK || !strings.Contains(string(html), "practicegw") || !strings.Contains(string(html), ">Allow<") {
				t.Fatalf("authorize page %d: %s", page.StatusCode, html)
			}
			if c.call(t, "unknown") != http.StatusUnauthorized {
				t.Fatal("the API took an unknown token")
			}
			tok := consentFor(t, id, conf)
			if tok.RefreshToken == "" || tok.Expiry.IsZero() {
				t.Fatalf("token %+v: want a refresh token and an expiry", tok)
			}
			if st := c.call(t, tok.AccessToken); st != http.StatusOK {
				t.Fatalf("the API answered %d to the consent's access token", st)
			}

			verifier := oauth2.GenerateVerifier()
			back, err := id.Allow(conf.AuthCodeURL("st-2", oauth2.S256ChallengeOption(verifier)))
			if err != nil {
				t.Fatal(err)
			}
			code := back.Query().Get("code")
			if _, err := conf.Exchange(ctx, code, oauth2.VerifierOption("not-the-verifier")); grantError(err) != "invalid_grant" {
				t.Fatalf("wrong verifier: %v", err)
			}
			if _, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier)); grantError(err) != "invalid_grant" {
				t.Fatalf("the code worked twice: %v", err)
			}
			back, _ = id.Allow(conf.AuthCodeURL("st-3", oauth2.S256ChallengeOption(verifier)))
			other := *conf
			other.RedirectURL = testRedirect + "?x=1"
			if _, err := other.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier)); grantError(err) != "invalid_grant" {
				t.Fatalf("another redirect_uri: %v", err)
			}
			back, _ = id.Allow(conf.AuthCodeURL("st-4", oauth2.S256ChallengeOption(verifier)))
			wrong := *conf
			wrong.ClientSecret = "nope"
			if _, err := wrong.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier)); grantError(err) != "invalid_client" {
				t.Fatalf("wrong client secret: %v", err)
			}

			denied, err := id.Deny(conf.AuthCodeURL("st-5", oauth2.S256ChallengeOption(verifier)))
			if err != nil || denied.Query().Get("error") != "access_denied" || denied.Query().Get("state") != "st-5" || denied.Query().Has("code") {
				t.Fatalf("deny: %v %v", denied, err)
			}
			noPKCE, err := id.Allow(conf.AuthCodeURL("st-6"))
			if err != nil || noPKCE.Query().Get("error") != "invalid_request" {
				t.Fatalf("no PKCE: %v %v", noPKCE, err)
			}
			for name, mod := range map[string]func(*oauth2.Config){
				"client_id":    func(c *oauth2.Config) { c.ClientID = "someone-else" },
				"redirect_uri": func(c *oauth2.Config) { c.RedirectURL = "https://evil.example/cb" },
			} {
				bad := *conf
				mod(&bad)
				resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).
					Get(bad.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
					t.Fatalf("bad %s: %d %q; want 400 and no redirect", name, resp.StatusCode, resp.Header.Get("Location"))
				}
			}
			if n := len(id.Grants()); n != 1 {
				t.Fatalf("%d grants; want the one consent that was exchanged", n)
			}
		})
	}
}

// A refresh rotates the refresh token; the replaced one works for the
// grace period only; access tokens expire; a revoked grant refreshes no
// more and its access tokens stop working.
func TestIdentityRefreshRotationGraceAndRevoke(t *testing.T) {
	for _, c := range identityCases() {
		t.Run(c.name, func(t *testing.T) {
			id := c.start(t)
			clock := NewClock(time.Now())
			id.SetNow(clock.Now)
			id.SetGrace(5 * time.Minute)
			id.SetAccessTTL(10 * time.Minute)
			id.AllowRedirect(testRedirect)
			conf := oauthConfig(id, c.style)
			ctx := context.Background()
			tok := consentFor(t, id, conf)
			refresh := func(rt string) (*oauth2.Token, error) {
				return conf.TokenSource(ctx, &oauth2.Token{RefreshToken: rt}).Token()
			}

			t1, err := refresh(tok.RefreshToken)
			if err != nil || t1.RefreshToken == tok.RefreshToken {
				t.Fatalf("refresh: %+v, %v; want a new refresh token", t1, err)
			}
			// The replaced token still works (a lost answer is not a lost
			// connection), and replaces t1's in turn.
			t1, err = refresh(tok.RefreshToken)
			if err != nil {
				t.Fatalf("the replaced token inside the grace period: %v", err)
			}
			clock.Advance(5 * time.Minute)
			if _, err := refresh(tok.RefreshToken); grantError(err) != "invalid_grant" {
				t.Fatalf("the replaced token after the grace period: %v", err)
			}
			if st := c.call(t, tok.AccessToken); st != http.StatusOK {
				t.Fatalf("a live access token: %d", st)
			}
			clock.Advance(5 * time.Minute)
			if st := c.call(t, tok.AccessToken); st != http.StatusUnauthorized {
				t.Fatalf("an expired access token: %d", st)
			}
			t2, err := refresh(t1.RefreshToken)
			if err != nil {
				t.Fatal(err)
			}
			if g := id.Grants()[0]; g.RefreshToken != t2.RefreshToken || g.Refreshes != 3 || g.Revoked {
				t.Fatalf("grant %+v", g)
			}
			id.Revoke(t2.RefreshToken)
			if !id.Revoked(t2.AccessToken) || !id.Revoked(t1.RefreshToken) || id.Revoked("unknown") {
				t.Fatal("Revoked does not name the grant's tokens")
			}
			if _, err := refresh(t2.RefreshToken); grantError(err) != "invalid_grant" {
				t.Fatalf("a revoked grant: %v", err)
			}
			if got := id.Refusals(); got[t2.RefreshToken] != 1 || got[tok.RefreshToken] != 1 || len(got) != 2 {
				t.Fatalf("refusals %v; want the replaced and the revoked token once each", got)
			}
			if st := c.call(t, t2.AccessToken); st != http.StatusUnauthorized {
				t.Fatalf("a revoked grant's access token: %d", st)
			}
			if st := c.call(t, "unknown"); st != http.StatusUnauthorized {
				t.Fatalf("an unknown token: %d", st)
			}
		})
	}
}

// The revocation endpoint (RFC 7009) revokes the grant of the token it is
// given, with the client's authentication where the vendor asks for it,
// and answers 200 for a token it does not know; Dropbox revokes the
// access token it is called with.
func TestIdentityRevocationEndpoint(t *testing.T) {
	for _, c := range identityCases() {
		t.Run(c.name, func(t *testing.T) {
			id := c.start(t)
			id.AllowRedirect(testRedirect)
			conf := oauthConfig(id, c.style)
			tok := consentFor(t, id, conf)
			revoke := func(token string, secret string) int {
				form := url.Values{"token": {token}, "token_type_hint": {"refresh_token"}}
				header := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
				switch id.vendor.revocationAuth {
				case "client":
					req, _ := http.NewRequest("POST", "http://x", nil)
					req.SetBasicAuth(id.ClientID, secret)
					header["Authorization"] = req.Header.Get("Authorization")
				case "bearer":
					form = nil
					header = map[string]string{"Authorization": "Bearer " + token}
				}
				return apiStatus(t, "POST", id.RevokeURL(), form.Encode(), header)
			}
			switch id.vendor.revocationAuth {
			case "":
				if id.RevokeURL() != "" {
					t.Fatal("Microsoft offers no revocation endpoint")
				}
				return
			case "client":
				if st := revoke(tok.RefreshToken, "wrong"); st != http.StatusUnauthorized || id.Revoked(tok.RefreshToken) {
					t.Fatalf("revocation without the client's secret: %d", st)
				}
			}
			if id.vendor.revocationAuth != "bearer" {
				if st := revoke("unknown-token", id.ClientSecret); st != http.StatusOK {
					t.Fatalf("an unknown token: %d, want 200", st)
				}
			}
			target := tok.RefreshToken
			if id.vendor.revocationAuth == "bearer" {
				target = tok.AccessToken
			}
			if st := revoke(target, id.ClientSecret); st != http.StatusOK || !id.Revoked(tok.RefreshToken) {
				t.Fatalf("revocation: %d, revoked %v", st, id.Revoked(tok.RefreshToken))
			}
			if st := c.call(t, tok.AccessToken); st != http.StatusUnauthorized {
				t.Fatalf("the revoked grant's access token: %d", st)
			}
		})
	}
}

// Xero's GET /connections lists the tenants a consent reaches in Xero's
// shape; the API refuses (403) a tenant the token's grant does not reach,
// and DELETE /connections/{id} stops the grant reaching one.
func TestXeroConnections(t *testing.T) {
	x := StartXero(t)
	second := "b3b4c5d6-0000-4000-8000-000000000002"
	x.AddTenant(second, "Hollis & Vane LLP")
	x.Identity.AllowRedirect(testRedirect)
	conf := oauthConfig(x.Identity, oauth2.AuthStyleInHeader)
	tok := consentFor(t, x.Identity, conf)

	list := func() []map[string]any {
		req, _ := http.NewRequest("GET", x.ConnectionsURL(), nil)
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out []map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /connections: %d %v", resp.StatusCode, err)
		}
		return out
	}
	got := list()
	req, _ := http.NewRequest("GET", strings.Replace(x.ConnectionsURL(), "/connections", "/Connections", 1)+"?authEventId="+newUUID(), nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /Connections?authEventId=: %v %v", resp, err)
	} else {
		var other []any
		json.NewDecoder(resp.Body).Decode(&other)
		resp.Body.Close()
		if len(other) != 0 {
			t.Fatalf("another consent's connections: %v", other)
		}
	}
	if len(got) != 2 || got[1]["tenantId"] != second || got[1]["tenantName"] != "Hollis & Vane LLP" ||
		got[0]["tenantType"] != "ORGANISATION" || got[0]["authEventId"] != x.Identity.Grants()[0].ID {
		t.Fatalf("connections %v", got)
	}
	for _, k := range []string{"id", "authEventId", "tenantId", "tenantType", "tenantName", "createdDateUtc", "updatedDateUtc"} {
		if _, ok := got[0][k]; !ok {
			t.Fatalf("a connection without %s: %v", k, got[0])
		}
	}
	invoices := func(tenant string) int {
		return apiStatus(t, "GET", x.URL+"/Invoices", "", map[string]string{"Authorization": "Bearer " + tok.AccessToken, "xero-tenant-id": tenant})
	}
	if invoices(second) != http.StatusOK || invoices("c0000000-0000-4000-8000-000000000009") != http.StatusForbidden {
		t.Fatal("the tenant header is not checked against the grant")
	}
	if st := apiStatus(t, "DELETE", x.ConnectionsURL()+"/"+got[1]["id"].(string), "", map[string]string{"Authorization": "Bearer " + tok.AccessToken}); st != http.StatusNoContent {
		t.Fatalf("DELETE /connections/{id}: %d", st)
	}
	if got := list(); len(got) != 1 || invoices(second) != http.StatusForbidden {
		t.Fatalf("after DELETE: %v, the tenant still reached", got)
	}
	if st := apiStatus(t, "GET", x.ConnectionsURL(), "", map[string]string{"Authorization": "Bearer nope"}); st != http.StatusUnauthorized {
		t.Fatalf("GET /connections with an unknown token: %d", st)
	}
}

// XPM signs in through Xero: with the Xero double's identity, one
// consent's access token reaches both APIs.
func TestXPMTakesXeroConsent(t *testing.T) {
	x, xpm := StartXero(t), StartXPM(t)
	xpm.UseIdentity(x.Identity)
	x.Identity.AllowRedirect(testRedirect)
	conf := oauthConfig(x.Identity, oauth2.AuthStyleInHeader)
	conf.Scopes = []string{"offline_access", "practicemanager.read"}
	tok := consentFor(t, x.Identity, conf)
	header := map[string]string{"Authorization": "Bearer " + tok.AccessToken, "xero-tenant-id": xpm.TenantID}
	if st := apiStatus(t, "GET", xpm.URL+"/v3.1/client.api/list", "", header); st != http.StatusOK {
		t.Fatalf("XPM answered %d to the Xero consent's token", st)
	}
	x.Identity.RevokeAll()
	if st := apiStatus(t, "GET", xpm.URL+"/v3.1/client.api/list", "", header); st != http.StatusUnauthorized {
		t.Fatalf("XPM answered %d to a revoked grant's token", st)
	}
}
