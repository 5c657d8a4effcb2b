package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/practicegw/practicegw/store/connection"
)

// connectAdmin answers the connection routes of a gateway's admin
// endpoint as the gateway does, for one firm, with a vendor whose consent
// the test gives (consent) while the command waits.
type connectAdmin struct {
	mu      sync.Mutex
	conns   map[string]*connection.View
	asked   []string
	bodies  []string
	polled  chan struct{} // a GET of a pending connection
	consent connection.View
}

func newConnectAdmin() *connectAdmin {
	return &connectAdmin{conns: map[string]*connection.View{}, polled: make(chan struct{}, 100)}
}

func (a *connectAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, r.Method+" "+r.URL.Path)
	var req connection.Request
	if r.Body != nil && r.Method != http.MethodGet {
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil && r.Method != http.MethodDelete {
			http.Error(w, `{"error":"reading connection request: `+err.Error()+`"}`, http.StatusBadRequest)
			return
		}
		b, _ := json.Marshal(req)
		a.bodies = append(a.bodies, string(b))
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/practicegw/connections/frm_hollis")
	if !ok {
		http.Error(w, `{"error":"unknown firm"}`, http.StatusNotFound)
		return
	}
	id := strings.TrimPrefix(rest, "/")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && id == "":
		if req.Role == "ledger" && len(a.conns) > 0 {
			http.Error(w, `{"error":"conflict: the firm's ledger is connected already"}`, http.StatusConflict)
			return
		}
		v := &connection.View{Connection: connection.Connection{ID: "con_1", Firm: "frm_hollis", Role: req.Role,
			System: req.System, Status: connection.Pending}, AuthorizeURL: "https://login.xero.example/authorize?state=st_1",
			SystemName: gatewayNames[req.System]}
		if req.AccessKey != "" {
			v.Status, v.AuthorizeURL = connection.Connected, ""
		}
		a.conns[v.ID] = v
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(v)
	case r.Method == http.MethodGet && id == "":
		var list []connection.View
		for _, v := range a.conns {
			list = append(list, *v)
		}
		json.NewEncoder(w).Encode(map[string]any{"data": list})
	case a.conns[id] == nil:
		http.Error(w, `{"error":"no such connection"}`, http.StatusNotFound)
	case r.Method == http.MethodGet:
		v := a.conns[id]
		if v.Status == connection.Pending {
			select {
			case a.polled <- struct{}{}:
			default: // the test has seen enough polls
			}
		}
		json.NewEncoder(w).Encode(v)
	case r.Method == http.MethodPatch && req.OrganisationID != "":
		v := a.conns[id]
		v.Status, v.OrganisationID, v.OrganisationName, v.Choices = connection.Connected, req.OrganisationID, "Demo Company (US)", nil
		json.NewEncoder(w).Encode(v)
	case r.Method == http.MethodPatch && req.Reconnect:
		v := a.conns[id]
		v.Status, v.AuthorizeURL = connection.Pending, "https://login.xero.example/authorize?state=st_2"
		json.NewEncoder(w).Encode(v)
	case r.Method == http.MethodDelete:
		v := a.conns[id]
		v.Status = connection.Disconnected
		json.NewEncoder(w).Encode(v)
	default:
		http.Error(w, `{"error":"method not allowed"}`, http.StatusMethodNotAllowed)
	}
}

// gatewayNames are how the gateway names the systems in its answers.
var gatewayNames = map[string]string{"xero": "Xero", "xpm": "Xero Practice Manager", "karbon": "Karbon"}

// give makes the vendor's consent arrive: the connection becomes what
// the callback would make it.
func (a *connectAdmin) give(id string, to connection.View) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := a.conns[id]
	v.Status, v.OrganisationID, v.OrganisationName, v.Choices, v.Reason = to.Status, to.OrganisationID, to.OrganisationName, to.Choices, to.Reason
}

func connectCommand(poll time.Duration) *cobra.Command {
	cmd := &cobra.Command{Use: "connect"}
	configureConnect(cmd, poll)
	return cmd
}

type result struct {
	out string
	err error
}

// runWaiting runs a command that waits for a consent, and gives the
// consent once the command has polled the pending connection.
func runWaiting(t *testing.T, admin *connectAdmin, cmd *cobra.Command, to connection.View, args ...string) result {
	t.Helper()
	done := make(chan result, 1)
	go func() {
		out, err := runCommand(t, cmd, args...)
		done <- result{out, err}
	}()
	select {
	case <-admin.polled:
		admin.give("con_1", to)
	case r := <-done:
		t.Fatalf("the command ended before polling: %v\n%s", r.err, r.out)
	case <-time.After(10 * time.Second):
		t.Fatal("the command never polled the connection")
	}
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not end once the consent came")
	}
	return result{}
}

func TestConnectWaitsForTheConsent(t *testing.T) {
	admin := newConnectAdmin()
	srv := httptest.NewServer(admin)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	r := runWaiting(t, admin, connectCommand(5*time.Millisecond), connection.View{Connection: connection.Connection{
		Status: connection.Connected, OrganisationID: "t1", OrganisationName: "Demo Company (UK)"}},
		"--firm", "frm_hollis", "--role", "ledger", "--system", "xero", "--admin", addr)
	if r.err != nil {
		t.Fatalf("connect: %v\n%s", r.err, r.out)
	}
	for _, want := range []string{
		"https://login.xero.example/authorize?state=st_1", "Waiting for the consent (up to 10m0s)",
		"Xero is connected for frm_hollis as ledger (con_1): Demo Company (UK).",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("connect printed no %q:\n%s", want, r.out)
		}
	}
	admin.mu.Lock()
	defer admin.mu.Unlock()
	if admin.asked[0] != "POST /practicegw/connections/frm_hollis" || admin.bodies[0] != `{"role":"ledger","system":"xero"}` {
		t.Errorf("connect asked %q with %q", admin.asked, admin.bodies)
	}
	for _, a := range admin.asked[1:] {
		if a != "GET /practicegw/connections/frm_hollis/con_1" {
			t.Errorf("connect then asked %s", a)
		}
	}
}

func TestConnectOffersTheChoiceOfOrganisation(t *testing.T) {
	admin := newConnectAdmin()
	srv := httptest.NewServer(admin)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	r := runWaiting(t, admin, connectCommand(5*time.Millisecond), connection.View{Connection: connection.Connection{
		Status: connection.ChooseOrganisation, Choices: []connection.Organisation{{ID: "t-uk", Name: "Demo UK"}, {ID: "t-us", Name: "Demo US"}}}},
		"--firm", "frm_hollis", "--role", "ledger", "--system", "xero", "--admin", addr)
	if r.err != nil {
		t.Fatalf("connect: %v\n%s", r.err, r.out)
	}
	for _, want := range []string{"t-uk", "Demo UK", "t-us", "Demo US",
		"practicegw connect choose --firm frm_hollis --connection con_1 --tenant TENANT"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("connect printed no %q:\n%s", want, r.out)
		}
	}
	out, err := runCommand(t, chooseCommand(), "--firm", "frm_hollis", "--connection", "con_1", "--tenant", "t-us", "--admin", addr)
	if err != nil || !strings.Contains(out, "Xero is connected for frm_hollis as ledger (con_1): Demo Company (US).") {
		t.Fatalf("choose: %v\n%s", err, out)
	}
	if _, err := runCommand(t, chooseCommand(), "--firm", "frm_hollis", "--connection", "con_1", "--admin", addr); err == nil {
		t.Error("choose without --tenant ran")
	}
}

func TestConnectKarbonByAccessKeyConnectsAtOnce(t *testing.T) {
	admin := newConnectAdmin()
	srv := httptest.NewServer(admin)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	out, err := runCommand(t, connectCommand(time.Hour), "--firm", "frm_hollis", "--role", "records", "--system", "karbon",
		"--access-key", "kbn_secret", "--admin", addr)
	if err != nil || !strings.Contains(out, "Karbon is connected for frm_hollis as records (con_1).") || strings.Contains(out, "kbn_secret") {
		t.Fatalf("karbon: %v\n%s", err, out)
	}
	// The key from standard input, kept out of the process list.
	cmd := connectCommand(time.Hour)
	cmd.SetIn(strings.NewReader("kbn_from_stdin\n"))
	if out, err := runCommand(t, cmd, "--firm", "frm_hollis", "--role", "records", "--system", "karbon", "--access-key", "-",
		"--admin", addr); err != nil || strings.Contains(out, "kbn_from_stdin") {
		t.Fatalf("karbon from stdin: %v\n%s", err, out)
	}
	cmd = connectCommand(time.Hour)
	cmd.SetIn(strings.NewReader(""))
	if _, err := runCommand(t, cmd, "--firm", "frm_hollis", "--role", "records", "--system", "karbon", "--access-key", "-",
		"--admin", addr); err == nil {
		t.Error("an empty standard input connected")
	}
	admin.mu.Lock()
	defer admin.mu.Unlock()
	want := []string{`{"role":"records","system":"karbon","access_key":"kbn_secret"}`,
		`{"role":"records","system":"karbon","access_key":"kbn_from_stdin"}`}
	if len(admin.asked) != 2 || strings.Join(admin.bodies, "|") != strings.Join(want, "|") {
		t.Errorf("karbon asked %q with %q", admin.asked, admin.bodies)
	}
}

func TestConnectStopsOnAFailureOrTheTimeout(t *testing.T) {
	admin := newConnectAdmin()
	srv := httptest.NewServer(admin)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	r := runWaiting(t, admin, connectCommand(5*time.Millisecond), connection.View{Connection: connection.Connection{
		Status: connection.NeedsReconnect, Reason: "Xero refused the grant: the app was removed"}},
		"--firm", "frm_hollis", "--role", "ledger", "--system", "xero", "--admin", addr)
	if r.err == nil || !strings.Contains(r.err.Error(), "Xero was not connected: Xero refused the grant: the app was removed") {
		t.Fatalf("a refused connection: %v\n%s", r.err, r.out)
	}

	admin = newConnectAdmin()
	srv3 := httptest.NewServer(admin)
	defer srv3.Close()
	r = runWaiting(t, admin, connectCommand(5*time.Millisecond), connection.View{Connection: connection.Connection{
		Status: connection.Disconnected}},
		"--firm", "frm_hollis", "--role", "ledger", "--system", "xero", "--admin", strings.TrimPrefix(srv3.URL, "http://"))
	if r.err == nil || !strings.Contains(r.err.Error(), "Xero was disconnected (con_1) before it was connected") {
		t.Fatalf("disconnected meanwhile: %v\n%s", r.err, r.out)
	}

	// Nothing comes back: the command gives up after --timeout.
	admin = newConnectAdmin()
	srv2 := httptest.NewServer(admin)
	defer srv2.Close()
	out, err := runCommand(t, connectCommand(5*time.Millisecond), "--firm", "frm_hollis", "--role", "ledger", "--system", "xero",
		"--timeout", "50ms", "--admin", strings.TrimPrefix(srv2.URL, "http://"))
	if err == nil || !strings.Contains(err.Error(), "no consent for con_1 within 50ms") {
		t.Fatalf("timeout: %v\n%s", err, out)
	}

	// The gateway's refusal is the command's error.
	out, err = runCommand(t, connectCommand(5*time.Millisecond), "--firm", "frm_hollis", "--role", "ledger", "--system", "xero",
		"--timeout", "50ms", "--admin", strings.TrimPrefix(srv2.URL, "http://"))
	if err == nil || err.Error() != "conflict: the firm's ledger is connected already" {
		t.Fatalf("a refusal: %v\n%s", err, out)
	}
	if _, err := runCommand(t, connectCommand(time.Millisecond), "--firm", "frm_hollis", "--role", "ledger", "--admin", addr); err == nil {
		t.Error("connect without --system ran")
	}
}

func TestConnectListReconnectAndDisconnect(t *testing.T) {
	admin := newConnectAdmin()
	srv := httptest.NewServer(admin)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if _, err := runCommand(t, connectCommand(time.Hour), "--firm", "frm_hollis", "--role", "records", "--system", "karbon",
		"--access-key", "k", "--admin", addr); err != nil {
		t.Fatal(err)
	}
	out, err := runCommand(t, connectionsListCommand(), "--firm", "frm_hollis", "--admin", addr)
	if err != nil || !strings.Contains(out, "con_1") || !strings.Contains(out, "Karbon") || !strings.Contains(out, "connected") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	// A connected connection whose sync fails says so in one word, never
	// "connected" alone beside it; the raw status never shows.
	admin.mu.Lock()
	admin.conns["con_1"].Sync = []connection.SyncStatus{{Role: "records", State: "failing"}}
	admin.mu.Unlock()
	out, err = runCommand(t, connectionsListCommand(), "--firm", "frm_hollis", "--admin", addr)
	if err != nil || !strings.Contains(out, "connected, failing") {
		t.Fatalf("list of a failing connection: %v\n%s", err, out)
	}
	admin.mu.Lock()
	admin.conns["con_1"].Sync = nil
	admin.conns["con_1"].Status, admin.conns["con_1"].Reason = connection.NeedsReconnect, "Karbon no longer accepts this connection's access key; reconnect it with a new one."
	admin.mu.Unlock()
	out, err = runCommand(t, connectionsListCommand(), "--firm", "frm_hollis", "--admin", addr)
	if err != nil || !strings.Contains(out, "needs reconnecting") || strings.Contains(out, "needs_reconnect") ||
		!strings.Contains(out, "reconnect it with a new one.") {
		t.Fatalf("list of a connection that needs reconnecting: %v\n%s", err, out)
	}
	r := runWaiting(t, admin, reconnectCommand(5*time.Millisecond), connection.View{Connection: connection.Connection{
		Status: connection.Connected}}, "--firm", "frm_hollis", "--connection", "con_1", "--admin", addr)
	if r.err != nil || !strings.Contains(r.out, "state=st_2") || !strings.Contains(r.out, "Karbon is connected") {
		t.Fatalf("reconnect: %v\n%s", r.err, r.out)
	}
	out, err = runCommand(t, disconnectCommand(), "--firm", "frm_hollis", "--connection", "con_1", "--admin", addr)
	if err != nil || !strings.Contains(out, "Karbon is disconnected for frm_hollis (con_1).") {
		t.Fatalf("disconnect: %v\n%s", err, out)
	}
	if _, err := runCommand(t, disconnectCommand(), "--firm", "frm_hollis", "--connection", "con_9", "--admin", addr); err == nil ||
		err.Error() != "no such connection" {
		t.Errorf("disconnect of an unknown connection: %v", err)
	}
}
