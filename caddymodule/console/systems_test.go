package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// pageConnections is the connection service as the Systems page sees it:
// connections in memory, each change noted.
type pageConnections struct {
	mu      sync.Mutex
	conns   []connection.View
	changes []string
	refuse  error
	n       int
	// vendor is the consent page's base URL; a test double's when set.
	vendor string
}

func (p *pageConnections) consentURL(state string) string {
	base := "https://login.xero.example"
	if p.vendor != "" {
		base = p.vendor
	}
	return base + "/authorize?state=" + state
}

func (p *pageConnections) List(_ context.Context, firm string) ([]connection.View, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []connection.View
	for _, c := range p.conns {
		if c.Firm == firm {
			out = append(out, stored(c))
		}
	}
	return out, nil
}

// stored is a connection as List and Get answer it: as the connection
// service, without the consent page's URL, which only Connect and Update
// can answer.
func stored(c connection.View) connection.View {
	c.AuthorizeURL = ""
	return c
}

func (p *pageConnections) Get(_ context.Context, firm, id string) (connection.View, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if c.ID == id && c.Firm == firm {
			return stored(c), nil
		}
	}
	return connection.View{}, connection.ErrNotFound
}

func (p *pageConnections) Connect(_ context.Context, firm string, r connection.Request) (connection.View, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changes = append(p.changes, "connect "+r.Role+" "+r.System+" key="+r.AccessKey)
	if p.refuse != nil {
		return connection.View{}, p.refuse
	}
	p.n++
	c := connection.View{Connection: connection.Connection{ID: "con_new" + string(rune('0'+p.n)), Firm: firm, Role: r.Role,
		System: r.System, Status: connection.Pending}, AuthorizeURL: p.consentURL("s&x=<1>")}
	if r.AccessKey != "" {
		c.Status, c.AuthorizeURL = connection.Connected, ""
	}
	p.conns = append(p.conns, c)
	return c, nil
}

func (p *pageConnections) change(firm, id, what string, apply func(*connection.View)) (connection.View, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changes = append(p.changes, what+" "+id)
	for i := range p.conns {
		if p.conns[i].ID == id && p.conns[i].Firm == firm {
			apply(&p.conns[i])
			return p.conns[i], nil
		}
	}
	return connection.View{}, connection.ErrNotFound
}

func (p *pageConnections) Update(_ context.Context, firm, id string, r connection.Request) (connection.View, error) {
	what := "choose " + r.OrganisationID
	if r.Reconnect {
		what = "reconnect key=" + r.AccessKey
	}
	return p.change(firm, id, what, func(c *connection.View) {
		if r.Reconnect {
			c.Status, c.AuthorizeURL = connection.Pending, p.consentURL("again")
			return
		}
		c.Status, c.OrganisationID, c.Choices = connection.Connected, r.OrganisationID, nil
	})
}

func (p *pageConnections) Disconnect(_ context.Context, firm, id string) (connection.View, error) {
	return p.change(firm, id, "disconnect", func(c *connection.View) { c.Status = connection.Disconnected })
}

func (p *pageConnections) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.changes...)
}

func systemsRig(t *testing.T) (*consoleRig, *pageConnections) {
	t.Helper()
	rg := newConsoleRig(t, "frm_acme", nil)
	at := rigNow.Add(-2 * time.Hour)
	conns := &pageConnections{conns: []connection.View{
		{Connection: connection.Connection{ID: "con_x", Firm: "frm_acme", Role: "ledger", System: "xero",
			Status: connection.NeedsReconnect, Reason: "Xero refused the grant <revoked>", OrganisationName: "Demo Company (UK)",
			ConnectedAt: &at, UpdatedAt: at},
			LastSuccessAt: &at,
			Sync:          []connection.SyncStatus{{Role: "ledger", State: "failing", ConfirmedAt: &at}}},
		{Connection: connection.Connection{ID: "con_d", Firm: "frm_acme", Role: "documents", System: "sharepoint",
			Status: connection.ChooseOrganisation, Choices: []connection.Organisation{{ID: "site-1", Name: "Clients"}, {ID: "site-2", Name: "Archive"}}}},
		{Connection: connection.Connection{ID: "con_other", Firm: "frm_birch", Role: "records", System: "karbon",
			Status: connection.NeedsReconnect, Reason: "another firm's"}},
	}}
	rg.h.connList, rg.h.connChange = conns, conns
	return rg, conns
}

func TestSystemsPageShowsEachRole(t *testing.T) {
	rg, _ := systemsRig(t)
	w := rg.do(t, "GET", "/console/systems", nil)
	body := w.Body.String()
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, body)
	}
	for _, want := range []string{
		`id="nav-systems" aria-current="page"`,
		// The ledger: Xero, needing a reconnect, with what the gateway knows.
		`data-connection="con_x"`, `data-status="needs_reconnect"`, "Demo Company (UK)",
		"Xero refused the grant &lt;revoked&gt;", `data-connected-at`, `data-last-success`, `data-sync-state="failing"`,
		`action="/console/systems/con_x/reconnect"`, `id="disconnect-ledger" href="/console/systems/con_x/disconnect"`,
		// Documents: the organisation to choose.
		`id="choose-documents"`, `<option value="site-1">Clients</option>`, `<option value="site-2">Archive</option>`, ">Choose</button>",
		// Records: never connected, so a Connect form with Karbon's key.
		`id="connect-records"`, `<option value="karbon">Karbon</option>`, `<option value="xpm">Xero Practice Manager</option>`,
		`id="connect-records-access-key"`, ">Connect</button>", ">Reconnect</button>", ">Disconnect</a>",
		`name="csrf" value="` + rg.csrf + `"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the Systems page lacks %q", want)
		}
	}
	for _, refused := range []string{"con_other", "another firm's", `id="connect-ledger"`, `id="connect-documents"`} {
		if strings.Contains(body, refused) {
			t.Errorf("the Systems page shows %q", refused)
		}
	}
}

// Every page says when a connection needs reconnecting, and links to
// Systems; another firm's never shows.
func TestNeedsReconnectBannerOnEveryPage(t *testing.T) {
	rg, conns := systemsRig(t)
	banner := "Xero needs to be reconnected: it no longer accepts the gateway's access (why is on Systems)."
	for _, path := range []string{"/console", "/console/webhooks", "/console/explorer", "/console/traffic",
		"/console/access", "/console/systems", "/console/no-such-page"} {
		body := rg.do(t, "GET", path, nil).Body.String()
		if !strings.Contains(body, banner) || !strings.Contains(body, `href="/console/systems#role-ledger"`) {
			t.Errorf("%s has no reconnect banner", path)
		}
		if strings.Contains(body, "another firm") {
			t.Errorf("%s shows another firm's connection", path)
		}
	}
	conns.mu.Lock()
	conns.conns[0].Status = connection.Connected
	conns.mu.Unlock()
	if body := rg.do(t, "GET", "/console", nil).Body.String(); strings.Contains(body, "needs to be reconnected") {
		t.Error("the banner stays once the connection is reconnected")
	}
}

func TestConnectFromSystemsGoesToTheConsentPage(t *testing.T) {
	rg, conns := systemsRig(t)
	w := rg.do(t, "POST", "/console/systems/connect", url.Values{"csrf": {rg.csrf}, "role": {"records"}, "system": {"xpm"},
		"access_key": {"typed by mistake"}})
	page := w.Body.String()
	if w.Code != http.StatusOK {
		t.Fatalf("connect: %d %s", w.Code, w.Header().Get("Location"))
	}
	if !strings.Contains(page, `id="continue-consent" data-follow href="https://login.xero.example/authorize?state=s&amp;x=%3c1%3e"`) {
		t.Errorf("the consent step does not lead to the vendor:\n%s", page)
	}

	w = rg.do(t, "POST", "/console/systems/connect", url.Values{"csrf": {rg.csrf}, "role": {"records"}, "system": {"karbon"},
		"access_key": {"kbn_key"}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/systems" {
		t.Fatalf("karbon: %d %s", w.Code, w.Header().Get("Location"))
	}
	if body := rg.do(t, "GET", "/console/systems", nil).Body.String(); !strings.Contains(body, "Karbon is connected") ||
		strings.Contains(body, "kbn_key") {
		t.Errorf("after karbon:\n%s", body)
	}
	want := []string{"connect records xpm key=", "connect records karbon key=kbn_key"}
	if got := conns.asked(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("asked %q, want %q", got, want)
	}
}

func TestChooseReconnectAndDisconnectFromSystems(t *testing.T) {
	rg, conns := systemsRig(t)
	w := rg.do(t, "POST", "/console/systems/con_d/choose", url.Values{"csrf": {rg.csrf}, "tenant_id": {"site-2"}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/systems" {
		t.Fatalf("choose: %d %s", w.Code, w.Header().Get("Location"))
	}
	w = rg.do(t, "POST", "/console/systems/con_x/reconnect", url.Values{"csrf": {rg.csrf}})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `data-follow href="https://login.xero.example/authorize?state=again"`) {
		t.Fatalf("reconnect: %d %s\n%s", w.Code, w.Header().Get("Location"), w.Body.String())
	}
	confirm := rg.do(t, "GET", "/console/systems/con_d/disconnect", nil)
	if confirm.Code != 200 || !strings.Contains(confirm.Body.String(), `id="confirm-disconnect"`) {
		t.Fatalf("confirm step: %d", confirm.Code)
	}
	if got := conns.asked(); len(got) != 2 {
		t.Fatalf("the confirm step changed something: %q", got)
	}
	w = rg.do(t, "POST", "/console/systems/con_d/disconnect", url.Values{"csrf": {rg.csrf}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("disconnect: %d", w.Code)
	}
	if body := rg.do(t, "GET", "/console/systems", nil).Body.String(); !strings.Contains(body, "SharePoint is disconnected") ||
		!strings.Contains(body, `id="connect-documents"`) {
		t.Errorf("after disconnecting, documents can be connected again:\n%s", body)
	}
	want := []string{"choose site-2 con_d", "reconnect key= con_x", "disconnect con_d"}
	if got := conns.asked(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("asked %q, want %q", got, want)
	}
	if w := rg.do(t, "GET", "/console/systems/con_other/disconnect", nil); w.Code != http.StatusNotFound {
		t.Errorf("another firm's connection: %d", w.Code)
	}
}

// Changes need the session's CSRF token; a refusal the administrator
// can act on is shown on Systems.
func TestSystemsChangesAreGuarded(t *testing.T) {
	rg, conns := systemsRig(t)
	for _, path := range []string{"/console/systems/connect", "/console/systems/con_x/reconnect",
		"/console/systems/con_d/choose", "/console/systems/con_x/disconnect"} {
		w := rg.do(t, "POST", path, url.Values{"csrf": {rg.h.sessions.csrf("other")}, "role": {"ledger"}, "system": {"xero"},
			"tenant_id": {"site-1"}})
		if w.Code != http.StatusForbidden {
			t.Errorf("%s with another session's token: %d", path, w.Code)
		}
	}
	if got := conns.asked(); len(got) != 0 {
		t.Fatalf("a refused form changed %q", got)
	}
	conns.refuse = practice.ErrConflict
	w := rg.do(t, "POST", "/console/systems/connect", url.Values{"csrf": {rg.csrf}, "role": {"records"}, "system": {"xpm"}})
	if w.Code != http.StatusSeeOther {
		t.Fatalf("refused connect: %d", w.Code)
	}
	if body := rg.do(t, "GET", "/console/systems", nil).Body.String(); !strings.Contains(body, "flash bad") {
		t.Errorf("the refusal is not shown:\n%s", body)
	}
}

// A role the Caddyfile sets is shown as such, with no Connect form: a
// connection there would be refused.
func TestSystemsShowsWhatTheCaddyfileSets(t *testing.T) {
	rg, _ := systemsRig(t)
	rg.syncs.statuses["frm_acme"] = []readmodel.Status{{Firm: "frm_acme", Role: "records", System: "karbon", Label: "Karbon",
		State: readmodel.StateLive}}
	body := rg.do(t, "GET", "/console/systems", nil).Body.String()
	if !strings.Contains(body, "<strong>Karbon</strong>, set by the gateway's configuration") || strings.Contains(body, `id="connect-records"`) {
		t.Errorf("records set by the Caddyfile:\n%s", body)
	}
	if !strings.Contains(body, `data-connection="con_x"`) {
		t.Error("the ledger's connection is no longer shown")
	}
}

func TestSystemsWithoutConnections(t *testing.T) {
	rg := newConsoleRig(t, "frm_acme", nil)
	body := rg.do(t, "GET", "/console/systems", nil).Body.String()
	if !strings.Contains(body, `id="systems-not-offered"`) || strings.Contains(body, "needs to be reconnected") {
		t.Errorf("a gateway with no connect block:\n%s", body)
	}
	if w := rg.do(t, "POST", "/console/systems/connect", url.Values{"csrf": {rg.csrf}, "role": {"ledger"}}); w.Code != http.StatusNotFound {
		t.Errorf("connect without a service: %d", w.Code)
	}
}

// registeringConnections is the connection service of a gateway whose
// connect block registers the apps of some systems only.
type registeringConnections struct {
	*pageConnections
	registered map[string][]string
}

func (r registeringConnections) Registered(role string) []string { return r.registered[role] }

type demoApp []string

func (d demoApp) DemoRoles(string) []string { return d }

// The Systems page offers only the systems whose app the operator
// registered, says so when none is, and says in words that a role with
// no connection serves made-up demo records where the firm's block sets
// it to demo, and nothing at all otherwise.
func TestSystemsOffersWhatIsRegisteredAndSaysDemoRecords(t *testing.T) {
	rg, conns := systemsRig(t)
	conns.conns = conns.conns[:1] // the ledger's connection alone
	svc := registeringConnections{pageConnections: conns, registered: map[string][]string{"records": {"karbon"}}}
	rg.h.connList, rg.h.demo = svc, demoApp{"records"}
	body := rg.do(t, "GET", "/console/systems", nil).Body.String()
	for _, want := range []string{
		`id="connect-records"`, `<option value="karbon">Karbon</option>`,
		"<strong>Demo records.</strong>",
		`data-not-connected`, `data-none-registered`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the Systems page lacks %q", want)
		}
	}
	for _, refused := range []string{`<option value="xpm">`, `id="connect-documents"`, `<option value="sharepoint">`} {
		if strings.Contains(body, refused) {
			t.Errorf("the Systems page offers %q, which the operator did not register", refused)
		}
	}
	if n := strings.Count(body, "data-demo"); n != 1 {
		t.Errorf("%d roles say demo records, want the records role alone", n)
	}
}
