package vendortest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Identity is a double of a vendor's OAuth2 identity service (RFC 6749,
// PKCE as RFC 7636, revocation as RFC 7009), mounted by each OAuth2 vendor
// double at its vendor's paths: an authorize page with "Allow" and "Deny"
// (a form POST), the token endpoint (authorization_code with PKCE S256,
// refresh_token with rotation), revocation where the vendor offers it,
// and, on the Xero double, Xero's GET/DELETE /connections. The API doubles
// accept, beside their fixed token, any live access token it issued.
//
// One app is registered: ClientID and ClientSecret, with the redirect URIs
// AllowRedirect names (none by default: a consent needs one, as at the
// vendor). Every consent is a grant: its refresh token rotates on each
// refresh, the replaced one still working for a grace period (SetGrace,
// 30 minutes by default, as Xero's); its access tokens expire
// (SetAccessTTL, 30 minutes by default); revoking it (at the revocation
// endpoint, or Revoke/RevokeAll) stops all of them.
type Identity struct {
	// URL is the service's base (the double's server).
	URL string
	// ClientID and ClientSecret are the registered app's; AppName is the
	// name the consent page shows.
	ClientID, ClientSecret, AppName string
	// Faults makes the identity service misbehave, apart from the API.
	Faults Faults

	vendor identityVendor

	mu        sync.Mutex
	now       func() time.Time
	grace     time.Duration
	accessTTL time.Duration
	redirects map[string]bool
	tenants   []Tenant
	codes     map[string]*authCode
	grants    []*grant
	refresh   map[string]*refreshToken
	access    map[string]*accessToken
	refusals  map[string]int
	seq       int
}

// Tenant is an organisation a consent can reach (Xero's tenants).
type Tenant struct {
	ID, Name string
}

// Grant is one consent as the identity service keeps it.
type Grant struct {
	ID       string // Xero's authEventId
	ClientID string
	Scope    string
	// Tenants are the ids of the organisations the grant reaches.
	Tenants []string
	// RefreshToken is the newest refresh token.
	RefreshToken string
	// Refreshes counts the refresh grants it answered.
	Refreshes int
	Revoked   bool
}

// identityVendor is how one vendor's identity service differs: its paths
// ("{tenant}" stands for Microsoft's tenant segment), the name its
// consent page shows, how the client authenticates to the token endpoint
// ("basic" or "body") and to revocation ("client" as to the token
// endpoint, "none", "bearer" with an access token, "" for no endpoint).
type identityVendor struct {
	name                       string
	authorize, token, revoke   string
	clientAuth, revocationAuth string
	xeroConnections            bool
	// realmOnCallback is Intuit's: the consent chooses one company, which
	// the callback names (realmId) and the grant alone reaches.
	realmOnCallback bool
}

var (
	xeroIdentity = identityVendor{name: "Xero", authorize: "/identity/connect/authorize", token: "/connect/token",
		revoke: "/connect/revocation", clientAuth: "basic", revocationAuth: "client", xeroConnections: true}
	microsoftIdentity = identityVendor{name: "Microsoft", authorize: "/{tenant}/oauth2/v2.0/authorize",
		token: "/{tenant}/oauth2/v2.0/token", clientAuth: "body"}
	googleIdentity = identityVendor{name: "Google", authorize: "/o/oauth2/v2/auth", token: "/token", revoke: "/revoke",
		clientAuth: "body", revocationAuth: "none"}
	dropboxIdentity = identityVendor{name: "Dropbox", authorize: "/oauth2/authorize", token: "/oauth2/token",
		revoke: "/2/auth/token/revoke", clientAuth: "body", revocationAuth: "bearer"}
	// Intuit's three hosts (appcenter.intuit.com, oauth.platform.intuit.com,
	// developer.api.intuit.com) are one server here, at their paths.
	intuitIdentity = identityVendor{name: "Intuit", authorize: "/connect/oauth2", token: "/oauth2/v1/tokens/bearer",
		revoke: "/v2/oauth2/tokens/revoke", clientAuth: "basic", revocationAuth: "client", realmOnCallback: true}
)

// CodeTTL is how long an authorization code can be exchanged.
const CodeTTL = 10 * time.Minute

type authCode struct {
	clientID, redirectURI, challenge, scope string
	// realm is the company an Intuit consent chose.
	realm   string
	expires time.Time
}

type grant struct {
	Grant
	connections []xeroConnection
	refreshes   []string
}

type xeroConnection struct {
	id, tenantID string
	created      time.Time
}

type refreshToken struct {
	grant *grant
	until time.Time // zero while it is the newest
}

type accessToken struct {
	grant   *grant
	expires time.Time
}

func newIdentity(v identityVendor, clientID string) *Identity {
	return &Identity{ClientID: clientID, ClientSecret: clientID + "-secret", AppName: "practicegw", vendor: v,
		now: time.Now, grace: 30 * time.Minute, accessTTL: 30 * time.Minute, redirects: map[string]bool{},
		codes: map[string]*authCode{}, refresh: map[string]*refreshToken{}, access: map[string]*accessToken{},
		refusals: map[string]int{}}
}

// AuthorizeURL, TokenURL and RevokeURL are the service's endpoints
// (Microsoft's under the "common" tenant); RevokeURL is "" where the
// vendor offers no revocation.
func (i *Identity) AuthorizeURL() string { return i.URL + i.path(i.vendor.authorize) }
func (i *Identity) TokenURL() string     { return i.URL + i.path(i.vendor.token) }
func (i *Identity) RevokeURL() string {
	if i.vendor.revoke == "" {
		return ""
	}
	return i.URL + i.path(i.vendor.revoke)
}

func (i *Identity) path(p string) string { return strings.Replace(p, "{tenant}", "common", 1) }

// AllowRedirect registers a redirect URI of the app.
func (i *Identity) AllowRedirect(uri string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.redirects[uri] = true
}

// AddTenant adds an organisation that consents from now on reach.
func (i *Identity) AddTenant(id, name string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.tenants = append(i.tenants, Tenant{ID: id, Name: name})
}

// RemoveTenant stops consents from now on reaching an organisation, as
// when the user who consents no longer belongs to it; grants made before
// keep it.
func (i *Identity) RemoveTenant(id string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.tenants = slices.DeleteFunc(i.tenants, func(t Tenant) bool { return t.ID == id })
}

// SetNow sets the clock codes, tokens and grace periods expire on.
func (i *Identity) SetNow(now func() time.Time) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.now = now
}

// SetGrace sets how long a replaced refresh token still works; 0 refuses
// it at once.
func (i *Identity) SetGrace(d time.Duration) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.grace = d
}

// SetAccessTTL sets the lifetime of access tokens issued from now on.
func (i *Identity) SetAccessTTL(d time.Duration) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.accessTTL = d
}

// Grants are the consents given so far, oldest first.
func (i *Identity) Grants() []Grant {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make([]Grant, len(i.grants))
	for n, g := range i.grants {
		out[n] = g.snapshot()
	}
	return out
}

func (g *grant) snapshot() Grant {
	s := g.Grant
	s.Tenants = nil
	for _, c := range g.connections {
		s.Tenants = append(s.Tenants, c.tenantID)
	}
	return s
}

// Issued are every access and refresh token the service has issued,
// expired, replaced and revoked ones included: what a client must never
// show.
func (i *Identity) Issued() []string {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make([]string, 0, len(i.access)+len(i.refresh))
	for tok := range i.access {
		out = append(out, tok)
	}
	for tok := range i.refresh {
		out = append(out, tok)
	}
	slices.Sort(out)
	return out
}

// Revoke revokes the grant a refresh or access token belongs to, as the
// firm would by removing the app at the vendor.
func (i *Identity) Revoke(token string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if g := i.grantOf(token); g != nil {
		g.Revoked = true
	}
}

// RevokeAll revokes every grant.
func (i *Identity) RevokeAll() {
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, g := range i.grants {
		g.Revoked = true
	}
}

// Refusals counts, by refresh token, the refresh grants refused
// (invalid_grant): a client that sends a refused token again shows here.
func (i *Identity) Refusals() map[string]int {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make(map[string]int, len(i.refusals))
	for tok, n := range i.refusals {
		out[tok] = n
	}
	return out
}

// Revoked reports whether token belongs to a revoked grant.
func (i *Identity) Revoked(token string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	g := i.grantOf(token)
	return g != nil && g.Revoked
}

func (i *Identity) grantOf(token string) *grant {
	if rt := i.refresh[token]; rt != nil {
		return rt.grant
	}
	if at := i.access[token]; at != nil {
		return at.grant
	}
	return nil
}

// live returns the grant of an access token that works now: issued here,
// not expired, its grant not revoked.
func (i *Identity) live(token string) (Grant, bool) {
	if i == nil {
		return Grant{}, false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	at := i.access[token]
	if at == nil || at.grant.Revoked || !i.now().Before(at.expires) {
		return Grant{}, false
	}
	return at.grant.snapshot(), true
}

// bearer is the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) string {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return tok
}

// accepts reports whether r carries the double's fixed token or a live
// access token of id.
func accepts(r *http.Request, fixed string, id *Identity) bool {
	if r.Header.Get("Authorization") == "Bearer "+fixed {
		return true
	}
	_, ok := id.live(bearer(r))
	return ok
}

// mount serves the identity service's paths with i, behind its own
// faults, and everything else with api.
func (i *Identity) mount(api http.Handler) http.Handler {
	own := i.Faults.wrap(http.HandlerFunc(i.serve))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if i.route(r) == nil {
			api.ServeHTTP(w, r)
			return
		}
		own.ServeHTTP(w, r)
	})
}

func (i *Identity) serve(w http.ResponseWriter, r *http.Request) { i.route(r)(w, r) }

// route is the handler of an identity path, nil for any other.
func (i *Identity) route(r *http.Request) http.HandlerFunc {
	p := r.URL.Path
	switch {
	case i.matches(i.vendor.authorize, p):
		return i.authorize
	case i.matches(i.vendor.token, p):
		return i.tokenEndpoint
	case i.vendor.revoke != "" && p == i.vendor.revoke:
		return i.revocation
	case i.vendor.xeroConnections && connectionsPath(p):
		return i.connections
	}
	return nil
}

// connectionsPath is Xero's /Connections[/{id}], which Xero serves in
// either case.
func connectionsPath(p string) bool {
	p = strings.ToLower(p)
	return p == "/connections" || strings.HasPrefix(p, "/connections/")
}

// matches compares a path with a pattern whose "{tenant}" is any one
// segment.
func (i *Identity) matches(pattern, p string) bool {
	rest, ok := strings.CutPrefix(pattern, "/{tenant}")
	if !ok {
		return p == pattern
	}
	seg, tail, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return ok && seg != "" && "/"+tail == rest
}

// consent is an authorize request whose client and redirect URI are the
// app's.
type consent struct {
	clientID, redirectURI, state, scope, challenge string
}

// consentRequest checks an authorize request. A bad client or redirect URI
// is answered here (400, no redirect: the URI is not the app's); any other
// problem is an OAuth2 error sent to the redirect URI (problem != "").
func (i *Identity) consentRequest(w http.ResponseWriter, v url.Values) (c consent, problem string, ok bool) {
	c = consent{clientID: v.Get("client_id"), redirectURI: v.Get("redirect_uri"), state: v.Get("state"),
		scope: v.Get("scope"), challenge: v.Get("code_challenge")}
	i.mu.Lock()
	known := c.clientID == i.ClientID && i.redirects[c.redirectURI]
	i.mu.Unlock()
	if !known {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, "<!doctype html><title>Error</title><p>The app or its redirect URI is not registered.</p>")
		return c, "", false
	}
	switch {
	case v.Get("response_type") != "code":
		problem = "unsupported_response_type"
	case c.challenge == "" || v.Get("code_challenge_method") != "S256":
		problem = "invalid_request" // PKCE with S256 is required
	}
	return c, problem, true
}

// consentPage names an empty icon, or a browser showing it would ask the
// vendor's API for /favicon.ico, which no published description has.
var consentPage = template.Must(template.New("consent").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>{{.Vendor}}: allow {{.App}}</title></head>
<body><h1>{{.App}} wants to connect to your {{.Vendor}}</h1>
<p>Scopes: {{.Scope}}</p>
<form method="post" action="{{.Action}}">
{{range $k, $v := .Fields}}<input type="hidden" name="{{$k}}" value="{{$v}}">
{{end}}<button type="submit" name="decision" value="allow" id="allow">Allow</button>
<button type="submit" name="decision" value="deny" id="deny">Deny</button>
</form></body></html>`))

// authorize serves the consent page (GET) and the choice on it (POST).
func (i *Identity) authorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	v := r.Form
	c, problem, ok := i.consentRequest(w, v)
	if !ok {
		return
	}
	if problem != "" {
		redirect(w, r, c.redirectURI, url.Values{"error": {problem}, "state": {c.state}})
		return
	}
	switch r.Method {
	case http.MethodGet:
		fields := map[string]string{}
		for _, k := range []string{"response_type", "client_id", "redirect_uri", "state", "scope", "code_challenge", "code_challenge_method"} {
			fields[k] = v.Get(k)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		consentPage.Execute(w, map[string]any{"Vendor": i.vendor.name, "App": i.AppName, "Scope": c.scope,
			"Action": r.URL.Path, "Fields": fields})
	case http.MethodPost:
		if v.Get("decision") != "allow" {
			redirect(w, r, c.redirectURI, url.Values{"error": {"access_denied"}, "state": {c.state}})
			return
		}
		i.mu.Lock()
		code := i.secret("code")
		ac := &authCode{clientID: c.clientID, redirectURI: c.redirectURI, challenge: c.challenge, scope: c.scope,
			expires: i.now().Add(CodeTTL)}
		i.codes[code] = ac
		back := url.Values{"code": {code}, "state": {c.state}}
		if i.vendor.realmOnCallback && len(i.tenants) > 0 {
			ac.realm = i.tenants[0].ID
			back.Set("realmId", ac.realm)
		}
		i.mu.Unlock()
		redirect(w, r, c.redirectURI, back)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func redirect(w http.ResponseWriter, r *http.Request, uri string, q url.Values) {
	u, _ := url.Parse(uri)
	all := u.Query()
	for k, v := range q {
		all[k] = v
	}
	u.RawQuery = all.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// secret makes a token, code or id no one can guess; i.mu is held.
func (i *Identity) secret(kind string) string {
	b := make([]byte, 16)
	rand.Read(b)
	i.seq++
	return fmt.Sprintf("%s-%d-%s", kind, i.seq, hex.EncodeToString(b))
}

func oauthError(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, []byte(`{"error":"`+code+`"}`))
}

// client checks the app's authentication the vendor's way.
func (i *Identity) client(r *http.Request) bool {
	id, secret, basic := r.BasicAuth()
	if i.vendor.clientAuth == "body" {
		id, secret, basic = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret"), false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	return (basic || i.vendor.clientAuth == "body") && id == i.ClientID && secret == i.ClientSecret
}

func (i *Identity) tokenEndpoint(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	if !i.client(r) {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	var g *grant
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		g = i.exchange(r.PostForm)
	case "refresh_token":
		g = i.rotate(r.PostForm.Get("refresh_token"))
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	if g == nil {
		oauthError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	at := i.secret("at")
	i.access[at] = &accessToken{grant: g, expires: i.now().Add(i.accessTTL)}
	rt := i.secret("rt")
	i.refresh[rt] = &refreshToken{grant: g}
	g.refreshes = append(g.refreshes, rt)
	g.RefreshToken = rt
	b, _ := json.Marshal(map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": int(i.accessTTL.Seconds()),
		"refresh_token": rt, "scope": g.Scope})
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, b)
}

// exchange turns an authorization code into a new grant, nil when the
// code is unknown, used, expired, or does not match the request; i.mu is
// held.
func (i *Identity) exchange(f url.Values) *grant {
	code := f.Get("code")
	c := i.codes[code]
	delete(i.codes, code) // single use, even when the exchange fails
	if c == nil || !i.now().Before(c.expires) || c.redirectURI != f.Get("redirect_uri") || c.clientID != i.ClientID {
		return nil
	}
	sum := sha256.Sum256([]byte(f.Get("code_verifier")))
	if base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge {
		return nil
	}
	g := &grant{Grant: Grant{ID: newUUID(), ClientID: c.clientID, Scope: c.scope}}
	for _, t := range i.tenants {
		if c.realm == "" || c.realm == t.ID {
			g.connections = append(g.connections, xeroConnection{id: newUUID(), tenantID: t.ID, created: i.now()})
		}
	}
	i.grants = append(i.grants, g)
	return g
}

// Consent is a consent given without its pages, as a test needs one: a
// grant of scope (space-separated) reaching the organisations consents
// reach, and its first access and refresh tokens.
func (i *Identity) Consent(scope string) (access, refresh string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	g := &grant{Grant: Grant{ID: newUUID(), ClientID: i.ClientID, Scope: scope}}
	for _, t := range i.tenants {
		g.connections = append(g.connections, xeroConnection{id: newUUID(), tenantID: t.ID, created: i.now()})
	}
	i.grants = append(i.grants, g)
	access, refresh = i.secret("at"), i.secret("rt")
	i.access[access] = &accessToken{grant: g, expires: i.now().Add(i.accessTTL)}
	i.refresh[refresh] = &refreshToken{grant: g}
	g.refreshes, g.RefreshToken = []string{refresh}, refresh
	return access, refresh
}

// rotate checks a refresh token and starts the grace period of the ones
// it replaces; i.mu is held.
func (i *Identity) rotate(tok string) *grant {
	rt := i.refresh[tok]
	now := i.now()
	if rt == nil || rt.grant.Revoked || !rt.until.IsZero() && !now.Before(rt.until) {
		i.refusals[tok]++
		return nil
	}
	g := rt.grant
	for _, old := range g.refreshes {
		if r := i.refresh[old]; r.until.IsZero() {
			r.until = now.Add(i.grace)
		}
	}
	g.Refreshes++
	return g
}

// revocation is RFC 7009's endpoint (Dropbox's takes the access token
// that it revokes as its bearer): 200 for a token it does not know too.
func (i *Identity) revocation(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	tok := r.PostForm.Get("token")
	if i.vendor.realmOnCallback {
		// Intuit's takes {"token": ...} as JSON.
		var body struct {
			Token string `json:"token"`
		}
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") || json.NewDecoder(r.Body).Decode(&body) != nil || body.Token == "" {
			oauthError(w, http.StatusBadRequest, "invalid_request")
			return
		}
		tok = body.Token
	}
	switch i.vendor.revocationAuth {
	case "client":
		if !i.client(r) {
			oauthError(w, http.StatusUnauthorized, "invalid_client")
			return
		}
	case "bearer":
		tok = bearer(r)
		if _, ok := i.live(tok); !ok {
			dropboxError(w, http.StatusUnauthorized, "invalid_access_token/")
			return
		}
	}
	i.Revoke(tok)
	if i.vendor.revocationAuth == "bearer" {
		writeJSON(w, http.StatusOK, []byte("null"))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// newUUID is a random (version 4) UUID, as Xero's ids are.
func newUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// connections is Xero's GET /connections (the tenants a token's grant
// reaches, optionally those of one authEventId) and DELETE
// /connections/{id} (the grant stops reaching one).
func (i *Identity) connections(w http.ResponseWriter, r *http.Request) {
	tok := bearer(r)
	if _, ok := i.live(tok); !ok {
		writeJSON(w, http.StatusUnauthorized, []byte(`{"Type":null,"Title":"Unauthorized","Status":401,"Detail":"TokenExpired"}`))
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	g := i.access[tok].grant
	id := strings.TrimPrefix(r.URL.Path[len("/connections"):], "/")
	switch {
	case r.Method == http.MethodGet && id == "":
		out := []map[string]any{}
		if ev := r.URL.Query().Get("authEventId"); ev != "" && ev != g.ID {
			g = &grant{} // connections of another consent: none here
		}
		for _, c := range g.connections {
			at := c.created.UTC().Format("2006-01-02T15:04:05.0000000")
			out = append(out, map[string]any{"id": c.id, "authEventId": g.ID, "tenantId": c.tenantID,
				"tenantType": "ORGANISATION", "tenantName": i.tenantName(c.tenantID), "createdDateUtc": at, "updatedDateUtc": at})
		}
		b, _ := json.Marshal(out)
		writeJSON(w, http.StatusOK, b)
	case r.Method == http.MethodDelete && id != "":
		n := slices.IndexFunc(g.connections, func(c xeroConnection) bool { return c.id == id })
		if n < 0 {
			writeJSON(w, http.StatusNotFound, []byte(`{"Type":null,"Title":"NotFound","Status":404,"Detail":"Connection not found"}`))
			return
		}
		g.connections = slices.Delete(g.connections, n, n+1)
		w.WriteHeader(http.StatusNoContent)
	default:
		writeJSON(w, http.StatusMethodNotAllowed, []byte(`{"Type":null,"Title":"MethodNotAllowed","Status":405}`))
	}
}

func (i *Identity) tenantName(id string) string {
	for _, t := range i.tenants {
		if t.ID == id {
			return t.Name
		}
	}
	return ""
}

// reaches reports whether tenantID is one the grant of a live access
// token reaches.
func (i *Identity) reaches(token, tenantID string) (live, reached bool) {
	g, ok := i.live(token)
	return ok, ok && slices.Contains(g.Tenants, tenantID)
}

// Allow gives consent on the authorize page at authorizeURL as a user
// would (the page, then its "Allow" button) and returns where the
// service redirects the browser.
func (i *Identity) Allow(authorizeURL string) (*url.URL, error) {
	return i.decide(authorizeURL, "allow")
}

// Deny refuses consent on the authorize page at authorizeURL.
func (i *Identity) Deny(authorizeURL string) (*url.URL, error) { return i.decide(authorizeURL, "deny") }

func (i *Identity) decide(authorizeURL, decision string) (*url.URL, error) {
	hc := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	page, err := hc.Get(authorizeURL)
	if err != nil {
		return nil, err
	}
	page.Body.Close()
	if page.StatusCode == http.StatusFound {
		return page.Location()
	}
	if page.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("authorize page: %s", page.Status)
	}
	u, err := url.Parse(authorizeURL)
	if err != nil {
		return nil, err
	}
	form := u.Query()
	form.Set("decision", decision)
	u.RawQuery = ""
	resp, err := hc.PostForm(u.String(), form)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return nil, fmt.Errorf("consent: %s", resp.Status)
	}
	return resp.Location()
}
