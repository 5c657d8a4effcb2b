package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// TestCleanStopLosesNothing: what a gateway holds in memory for a later
// write survives a clean stop, by SIGTERM and by `practicegw stop`, and a
// reload before it: the hourly usage the rate limiter counts, the
// credential's last use (written every 5 s, so the last requests' only at
// the stop), a delivery's state and attempt, and the sync's checkpoint.
// Each is read back from the gateway started again on the same data, and
// the stop logs no loss ("usage lost on close" was logged, the usage
// written after the store it goes to was closed).
func TestCleanStopLosesNothing(t *testing.T) {
	for _, how := range []string{"SIGTERM", "practicegw stop"} {
		t.Run(how, func(t *testing.T) { cleanStop(t, how) })
	}
}

func cleanStop(t *testing.T, how string) {
	v := startVendors(t, vendorOptions{})
	g := v.gateway(t)
	cred := g.issueWith("frm_hollis", false, "100/s", "clients:read")
	sandbox := g.issue("frm_hollis", true, "webhooks:read", "webhooks:write")
	eventually.NoError(t, 60*time.Second, poll, "the records backfilled", func() error {
		if st := syncOf(t, g, "frm_hollis", "records"); st.State != "live" {
			return fmt.Errorf("records sync %s", st.State)
		}
		return nil
	})

	// A receiver that fails: the delivery is retrying after one attempt.
	var attempts atomic.Int32
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer failing.Close()
	ep, _ := register(t, g, sandbox.Token, failing.URL+"/hook", "client.updated")
	if _, err := g.cli("trigger", "client.updated", "--firm", "frm_hollis"); err != nil {
		t.Fatal(err)
	}
	var delivery map[string]any
	eventually.NoError(t, 20*time.Second, poll, "the delivery attempted once", func() error {
		list := g.do(t, "GET", "/v1/webhook_endpoints/"+ep+"/deliveries", sandbox.Token, nil).json(t)["data"].([]any)
		if len(list) != 1 {
			return fmt.Errorf("%d deliveries", len(list))
		}
		delivery = list[0].(map[string]any)
		if delivery["state"] != "retrying" {
			return fmt.Errorf("delivery %v", delivery["state"])
		}
		return nil
	})

	// Requests before and after a reload, the last of them within the
	// 5 s before the stop.
	reads := 0
	read := func() {
		t.Helper()
		if r := g.do(t, "GET", "/v1/clients?limit=1", cred.Token, nil); r.StatusCode != 200 {
			t.Fatalf("a read: %d %s", r.StatusCode, r.body)
		}
		reads++
	}
	for range 3 {
		read()
	}
	if out, err := g.cli("reload", "--config", v.config, "--adapter", "caddyfile", "--address", g.admin); err != nil {
		t.Fatalf("reload: %v %s", err, out)
	}
	for range 4 {
		read()
	}
	lastRead := time.Now().UTC().Truncate(time.Second)

	switch how {
	case "SIGTERM":
		g.stop()
	default:
		if out, err := g.cli("stop", "--address", g.admin); err != nil {
			t.Fatalf("practicegw stop: %v %s", err, out)
		}
		if !g.proc.wait(30 * time.Second) {
			t.Fatal("practicegw stop did not stop the gateway")
		}
	}
	logs := g.logs.String()
	for _, lost := range []string{"lost on close", "database not open", "not saved", "last use"} {
		if strings.Contains(logs, lost) {
			t.Errorf("the stop logged %q:\n%s", lost, tail(logs, 3000))
		}
	}

	// Started again on the same data: everything is there.
	g.start(v.config)
	st := syncOf(t, g, "frm_hollis", "records")
	for _, k := range st.Kinds {
		if !k.Backfilled {
			t.Errorf("the records sync's %s start again from the beginning: its checkpoint was lost", k.Kind)
		}
	}
	c := credentialOf(t, g, "frm_hollis", cred.ID)
	used := 0
	if c.Traffic != nil {
		for _, h := range c.Traffic.Hours {
			used += int(h.Admitted)
		}
	}
	if used != reads {
		t.Errorf("the usage kept: %d requests, want %d", used, reads)
	}
	if c.LastUsedAt == nil || c.LastUsedAt.Before(lastRead.Add(-time.Second)) {
		t.Errorf("the last use kept: %v, want the last read's, %s", c.LastUsedAt, lastRead)
	}
	list := g.do(t, "GET", "/v1/webhook_endpoints/"+ep+"/deliveries", sandbox.Token, nil).json(t)["data"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["id"] != delivery["id"] {
		t.Fatalf("the deliveries after the stop: %v", list)
	}
	got := g.do(t, "GET", "/v1/deliveries/"+delivery["id"].(string), sandbox.Token, nil).json(t)
	if n := len(got["attempts"].([]any)); n < 1 || (got["state"] != "retrying" && got["state"] != "failed") {
		t.Errorf("the delivery after the stop: %v with %d attempts", got["state"], n)
	}
}

// syncView is a sync as the admin route answers it.
type syncView struct {
	State string `json:"state"`
	Kinds []struct {
		Kind       string `json:"kind"`
		Backfilled bool   `json:"backfilled"`
	} `json:"kinds"`
}

// syncOf is firm's sync of role, from g's admin route.
func syncOf(t *testing.T, g *gateway, firm, role string) syncView {
	t.Helper()
	resp, err := client.Get("http://" + g.admin + "/practicegw/sync/" + firm)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct {
			syncView
			System string `json:"system"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	for _, s := range body.Data {
		if s.System == role {
			return s.syncView
		}
	}
	t.Fatalf("%s has no %s sync", firm, role)
	return syncView{}
}

// credentialView is a credential as `practicegw credential list --json`
// prints it.
type credentialView struct {
	ID         string     `json:"id"`
	LastUsedAt *time.Time `json:"last_used_at"`
	Traffic    *struct {
		Hours []struct {
			Admitted int64 `json:"admitted"`
		} `json:"hours"`
	} `json:"traffic"`
}

func credentialOf(t *testing.T, g *gateway, firm, id string) credentialView {
	t.Helper()
	out, err := g.cli("credential", "list", "--firm", firm, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var list []credentialView
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("credential list: %v: %s", err, out)
	}
	for _, c := range list {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no credential %s in %s", id, out)
	return credentialView{}
}
