package console

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// systemsStates are the Systems page's connections in each state an
// administrator meets, with the syncs the gateway reports of them: the
// ledger connected and live, records connected to a vendor that fails,
// documents waiting for consent; then the ledger needing reconnecting,
// records lagging and documents choosing a site.
func systemsStates(t *testing.T) (*consoleRig, *pageConnections) {
	t.Helper()
	rg := newConsoleRig(t, "frm_acme", nil)
	connected := rigNow.Add(-3 * time.Hour)
	confirmed := rigNow.Add(-2 * time.Minute)
	conns := &pageConnections{conns: []connection.View{
		{Connection: connection.Connection{ID: "con_x", Firm: "frm_acme", Role: "ledger", System: "xero", Status: connection.Connected,
			OrganisationID: "tnt-1", OrganisationName: "Hollis & Vane <UK>", ConnectedAt: &connected, UpdatedAt: connected},
			LastSuccessAt: &confirmed, Sync: []connection.SyncStatus{{Role: "ledger", State: "live", ConfirmedAt: &confirmed}}},
		{Connection: connection.Connection{ID: "con_k", Firm: "frm_acme", Role: "records", System: "karbon", Status: connection.Connected,
			ConnectedAt: &connected, UpdatedAt: connected},
			LastSuccessAt: &confirmed, Sync: []connection.SyncStatus{{Role: "records", State: "failing", ConfirmedAt: &confirmed}}},
		{Connection: connection.Connection{ID: "con_s", Firm: "frm_acme", Role: "documents", System: "sharepoint", Status: connection.Pending,
			UpdatedAt: rigNow}},
	}}
	rg.h.connList, rg.h.connChange = conns, conns
	rg.syncs.statuses["frm_acme"] = []readmodel.Status{
		{Firm: "frm_acme", Role: "ledger", System: "xero", Label: "Xero", State: readmodel.StateLive, ConfirmedAt: confirmed,
			Kinds: []readmodel.KindStatus{{Kind: practice.Invoices, State: readmodel.StateLive, Backfilled: true, ConfirmedAt: confirmed}}},
		{Firm: "frm_acme", Role: "records", System: "karbon", Label: "Karbon", State: readmodel.StateFailing, ConfirmedAt: confirmed,
			Why: "clients: poll Karbon clients: karbon: list contacts: karbon/karbon/frm_acme unavailable (retry after 29.899s): circuit breaker is open",
			Kinds: []readmodel.KindStatus{{Kind: practice.Clients, State: readmodel.StateFailing, Backfilled: true, ConfirmedAt: confirmed},
				{Kind: practice.Jobs, State: readmodel.StateLive, Backfilled: true, ConfirmedAt: confirmed}}},
	}
	return rg, conns
}

// section is the role's panel of the Systems page, as text: tags gone,
// spaces collapsed.
func rolePanel(t *testing.T, page, role string) string {
	t.Helper()
	start := strings.Index(page, `<section class="panel" id="role-`+role+`"`)
	if start < 0 {
		t.Fatalf("the Systems page has no %s panel", role)
	}
	end := strings.Index(page[start:], "</section>")
	html := page[start : start+end]
	text := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(html, " ")
	return strings.Join(strings.Fields(strings.NewReplacer("&#39;", "'", "&amp;", "&", "&lt;", "<", "&gt;", ">").Replace(text)), " ")
}

// The Systems page names each role once, says each connection's state in
// one badge that is true of its data too (never "connected" beside a
// failing sync), in words and sentences: no status token of the wire, no
// error chain, no "organisation" for a SharePoint site.
func TestSystemsPageSaysEachStatePlainly(t *testing.T) {
	rg, conns := systemsStates(t)
	checkPage := func(step string, want map[string][]string) {
		t.Helper()
		w := rg.do(t, "GET", "/console/systems", nil)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d", step, w.Code)
		}
		page := w.Body.String()
		for role, wants := range want {
			text := rolePanel(t, page, role)
			title := map[string]string{"records": "Records", "ledger": "Ledger", "documents": "Documents"}[role]
			if !strings.HasPrefix(text, title+" ") || strings.Contains(strings.ToLower(text), strings.ToLower(title+" "+role)) {
				t.Errorf("%s: the %s panel does not name its role once: %s", step, role, text)
			}
			for _, w := range wants {
				if !strings.Contains(text, w) {
					t.Errorf("%s: the %s panel does not say %q; it says:\n%s", step, role, w, text)
				}
			}
			for _, raw := range []string{"needs_reconnect", "choose_tenant", "poll Karbon", "circuit breaker", "karbon/karbon", "retry after",
				"invalid_grant", "Details"} {
				if strings.Contains(text, raw) {
					t.Errorf("%s: the %s panel says %q:\n%s", step, role, raw, text)
				}
			}
			if role == "documents" && strings.Contains(text, "organisation") {
				t.Errorf("%s: SharePoint's site is called an organisation:\n%s", step, text)
			}
			panel := page[strings.Index(page, `id="role-`+role+`"`):]
			panel = panel[:strings.Index(panel, "</section>")]
			if badges := regexp.MustCompile(`class="badge [a-z]+"`).FindAllString(panel, -1); len(badges) != 1 {
				t.Errorf("%s: the %s panel has %d badges, want one", step, role, len(badges))
			}
			if strings.Contains(text, "failing") && strings.Contains(text, " connected ") {
				t.Errorf("%s: the %s panel says connected beside failing:\n%s", step, role, text)
			}
		}
	}
	checkPage("connected", map[string][]string{
		"ledger": {"Xero live", "organisation Hollis & Vane <UK>", "Connected and up to date: confirmed with Xero 2 min ago."},
		"records": {"Karbon failing", "Karbon failed several times in a row; the gateway pauses its calls, then tries again.",
			"It affects the clients; the rest is up to date.", "Meanwhile its copy, last confirmed 2 min ago, is served as it was."},
		"documents": {"SharePoint waiting for consent", "Waiting for the administrator to allow access at SharePoint."},
	})

	conns.mu.Lock()
	conns.conns[0].Status = connection.NeedsReconnect
	conns.conns[0].Reason = "intuit refused the refresh token (invalid_grant): the connection must be reconnected"
	conns.conns[2].Status = connection.ChooseOrganisation
	conns.conns[2].Choices = []connection.Organisation{{ID: "site-1", Name: "Clients"}, {ID: "site-2", Name: "Marketing"}}
	conns.mu.Unlock()
	rg.syncs.statuses["frm_acme"][0].State, rg.syncs.statuses["frm_acme"][0].Why = readmodel.StateFailing, "the connection waits to be reconnected"
	rg.syncs.statuses["frm_acme"][1].State, rg.syncs.statuses["frm_acme"][1].Why = readmodel.StateLagging, "jobs not confirmed since 2026-03-02T09:58:00Z"
	rg.syncs.statuses["frm_acme"][1].Kinds[0].State = readmodel.StateLive
	rg.syncs.statuses["frm_acme"][1].Kinds[1].State = readmodel.StateLagging
	checkPage("needing attention", map[string][]string{
		"ledger": {"Xero needs reconnecting", "Xero no longer accepts this connection's grant; reconnect it.",
			"Until then its copy, last confirmed with Xero 2 min ago, is served as it was.", "Reconnect"},
		"records":   {"Karbon lagging", "Karbon has not confirmed the jobs since 09:58 UTC on 2 March 2026; the sync is behind and catches up on its next pass."},
		"documents": {"SharePoint choose the site", "SharePoint gave access to several sites: choose the one the gateway reads.", "Site Clients Marketing Choose"},
	})
}
