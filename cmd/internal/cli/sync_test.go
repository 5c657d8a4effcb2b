package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// syncAdmin answers the sync routes of a gateway's admin endpoint as the
// gateway does for a firm on Karbon and Xero, and notes what it was asked.
type syncAdmin struct {
	mu    sync.Mutex
	asked []string
}

func (a *syncAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.asked = append(a.asked, r.Method+" "+r.URL.Path)
	a.mu.Unlock()
	age := int64(95)
	karbon := adminapi.SyncView{Firm: "frm_acme", Role: "records", System: "karbon", State: "backfilling",
		Progress: "karbon jobs: 3,200 of about 5,000", CallsLastHour: 1234, BudgetPerHour: 3600,
		Kinds: []adminapi.SyncKindView{{Kind: practice.Clients, Backfilled: true, Records: 120},
			{Kind: practice.Jobs, Seen: 3200, About: 5000, Records: 3200}}}
	xero := adminapi.SyncView{Firm: "frm_acme", Role: "ledger", System: "xero", State: "failing",
		Why: "Xero refused the gateway's access; the sync tries again, and the connection may need reconnecting.", AgeSeconds: &age, ConfirmedAt: time.Now().Add(-95 * time.Second),
		CallsLastHour: 12, Kinds: []adminapi.SyncKindView{{Kind: practice.Invoices, Backfilled: true, Records: 7}},
		Plan: "polls every 4m30s: about 1,100 of 5,000 calls a day, at most 1,250 for this sync"}
	l := readmodel.Links{Of: "Xero contacts", In: "Karbon", Candidates: 340, Linked: 326, Missing: 12, Ambiguous: 2}
	xero.Links = &adminapi.LinksView{Of: l.Of, Records: l.In, Candidates: l.Candidates, Linked: l.Linked, Missing: l.Missing,
		Ambiguous: l.Ambiguous, Summary: l.String()}
	w.Header().Set("Content-Type", "application/json")
	switch r.Method + " " + r.URL.Path {
	case "GET /practicegw/sync/frm_acme":
		json.NewEncoder(w).Encode(map[string]any{"data": []adminapi.SyncView{karbon, xero}, "roles": []adminapi.RoleView{
			{Role: "records", Source: adminapi.SourceCaddyfile, System: "karbon"},
			{Role: "ledger", Source: adminapi.SourceConnection, System: "xero", Connection: "con_x1", Status: "needs_reconnect"},
			{Role: "documents", Source: adminapi.SourceNotConnected, System: "sharepoint", Connection: "con_s1", Status: "disconnected"}}})
	case "GET /practicegw/sync/frm_live":
		// A connection whose vendor fails: its role says failing, never
		// connected alone.
		json.NewEncoder(w).Encode(map[string]any{"data": []adminapi.SyncView{xero}, "roles": []adminapi.RoleView{
			{Role: "ledger", Source: adminapi.SourceConnection, System: "xero", Connection: "con_x2", Status: "connected"}}})
	case "GET /practicegw/sync/frm_new":
		json.NewEncoder(w).Encode(map[string]any{"data": []adminapi.SyncView{}, "roles": []adminapi.RoleView{
			{Role: "records", Source: adminapi.SourceDemo}, {Role: "ledger", Source: adminapi.SourceNotConnected},
			{Role: "documents", Source: adminapi.SourceConnection, System: "dropbox", Connection: "con_d1", Status: "connected"}}})
	case "GET /practicegw/sync/frm_demo":
		json.NewEncoder(w).Encode(map[string]any{"data": []adminapi.SyncView{}})
	case "POST /practicegw/sync/frm_acme/records/resync":
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(karbon)
	default:
		http.Error(w, `{"error":"firm frm_acme has no real documents system: not found"}`, http.StatusNotFound)
	}
}

func runCommand(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestSyncStatusCommand(t *testing.T) {
	admin := &syncAdmin{}
	srv := httptest.NewServer(admin)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	out, err := runCommand(t, syncStatusCommand(), "--firm", "frm_acme", "--admin", addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ROLE", "SERVED BY", "records    karbon, set in the Caddyfile",
		"ledger     xero, connection con_x1 (needs reconnecting): its copy is served, failing, until it is reconnected",
		"documents  not connected: /v1 refuses its reads until a system is connected (sharepoint connection con_s1 is disconnected)",
		"SYSTEM", "records", "karbon", "backfilling", "1234 of 3600", "clients 120, jobs 3200",
		"ledger", "xero", "failing", "1m35s",
		"records (karbon) backfill: karbon jobs: 3,200 of about 5,000",
		"ledger (xero) is failing. Xero refused the gateway's access; the sync tries again, and the connection may need reconnecting.",
		"ledger (xero) polls every 4m30s: about 1,100 of 5,000 calls a day, at most 1,250 for this sync",
		"ledger (xero) clients: 12 of 340 Xero contacts match no Karbon client; 2 match more than one, and link none",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}

	out, err = runCommand(t, syncStatusCommand(), "--firm", "frm_acme", "--json", "--admin", addr)
	var views []adminapi.SyncView
	if err != nil || json.Unmarshal([]byte(out), &views) != nil || len(views) != 2 || views[1].Why == "" {
		t.Fatalf("--json: %v\n%s", err, out)
	}

	out, err = runCommand(t, syncStatusCommand(), "--firm", "frm_demo", "--admin", addr)
	if err != nil || !strings.Contains(out, "frm_demo has no real system syncing") || strings.Contains(out, "its records are demo records") {
		t.Errorf("a firm on demo records: %v\n%s", err, out)
	}
	// Each role of a firm with nothing syncing yet says how it is served.
	out, err = runCommand(t, syncStatusCommand(), "--firm", "frm_new", "--admin", addr)
	for _, want := range []string{"records    demo records (made up, not the firm's)",
		"ledger     not connected: /v1 refuses its reads until a system is connected\n", "documents  dropbox, connection con_d1 (connected)\n"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("status of a firm with no sync lacks %q: %v\n%s", want, err, out)
		}
	}
	out, err = runCommand(t, syncStatusCommand(), "--firm", "frm_live", "--admin", addr)
	if err != nil || !strings.Contains(out, "ledger  xero, connection con_x2 (connected, failing)\n") {
		t.Errorf("a connected role whose sync fails: %v\n%s", err, out)
	}
	if _, err := runCommand(t, syncStatusCommand(), "--admin", addr); err == nil {
		t.Error("status without --firm ran")
	}
}

func TestSyncResyncCommand(t *testing.T) {
	admin := &syncAdmin{}
	srv := httptest.NewServer(admin)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	out, err := runCommand(t, resyncCommand(), "--firm", "frm_acme", "--system", "records", "--admin", addr)
	if err != nil || !strings.Contains(out, "Asked frm_acme's records (karbon) to resync") {
		t.Fatalf("resync: %v\n%s", err, out)
	}
	if _, err := runCommand(t, resyncCommand(), "--firm", "frm_acme", "--system", "documents", "--admin", addr); err == nil ||
		err.Error() != "firm frm_acme has no real documents system: not found" {
		t.Errorf("resync of a system the firm lacks: %v", err)
	}
	if _, err := runCommand(t, resyncCommand(), "--firm", "frm_acme", "--admin", addr); err == nil {
		t.Error("resync without --system ran")
	}
	admin.mu.Lock()
	defer admin.mu.Unlock()
	want := []string{"POST /practicegw/sync/frm_acme/records/resync", "POST /practicegw/sync/frm_acme/documents/resync"}
	if strings.Join(admin.asked, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the gateway was asked %q, want %q", admin.asked, want)
	}
}
