package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
)

// Issue 39's writes on a connected XPM, through the real binary: XPM
// connected with `practicegw connect` over the trial's doubles, the
// README's in_review move is refused naming the stages XPM's job states
// map to by their names; the firm adds a job state of its own in XPM,
// maps it with `practicegw connect stage-map`, and the same move then
// works, reads back and is written to XPM as that state. A mistyped
// state or stage is refused in the flags' words, and the map is kept with
// the connection across a restart of the gateway.
func TestStageMapOfAConnectedXPM(t *testing.T) {
	addr := freePort(t)
	public := "http://" + addr
	first, origins := freeVendorPorts(t)
	l, err := vendortest.ServeLocal(vendortest.LocalOptions{Host: "127.0.0.1", First: first, Gateway: public})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	opts := gatewayOptions{addr: addr, dataDir: t.TempDir(), config: "../config/try-connections.Caddyfile",
		env: append(origins, "PRACTICEGW_PUBLIC_URL="+public, "PRACTICEGW_SYNC_POLL=1s")}
	g := startGateway(t, opts)

	run := g.cliStart(t, nil, "connect", "--firm", "frm_hollis", "--role", "records", "--system", "xpm")
	page := run.await(t, regexp.MustCompile(`^\s+(http://\S+/connect/start/\S+)$`), 10*time.Second)[1]
	br := newConsentBrowser(t)
	redirect := consent(t, l.Xero, br, page)
	if r := br.callback(t, g, redirect, "Accept", "text/html"); r.StatusCode != 200 {
		t.Fatalf("the callback page: %d %s", r.StatusCode, r.body)
	}
	if err := run.wait(t, 10*time.Second); err != nil {
		t.Fatalf("%v: %s%s", err, run.out.String(), run.stderr.String())
	}
	if out := run.out.String(); strings.Contains(out, "choose the one") {
		id := regexp.MustCompile(`--connection (con_\w+)`).FindStringSubmatch(out)[1]
		if out, err := g.cli("connect", "choose", "--firm", "frm_hollis", "--connection", id, "--tenant", l.XPM.TenantID); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}

	tok := g.issue("frm_hollis", false, "jobs:read", "jobs:write").Token
	var job string
	eventually.NoError(t, 30*time.Second, 100*time.Millisecond, "XPM's jobs", func() error {
		r := g.do(t, "GET", "/v1/jobs", tok, nil)
		data, _ := r.json(t)["data"].([]any)
		if r.StatusCode != 200 || len(data) == 0 {
			return fmt.Errorf("%d %s", r.StatusCode, tail(string(r.body), 300))
		}
		job = data[0].(map[string]any)["id"].(string)
		return nil
	})
	move := func() response {
		return g.do(t, "POST", "/v1/jobs/"+job+"/stage", tok, map[string]any{"stage": "in_review", "note": "Ready for partner review"})
	}

	// XPM's own job states map by their names; none is a review.
	r := move()
	var refusal struct {
		Error struct {
			Code, Message, Param string
			MappedStages         []string `json:"mapped_stages"`
		}
	}
	json.Unmarshal(r.body, &refusal)
	mapped := []string{"planned", "awaiting_client", "in_progress", "completed", "cancelled"}
	if r.StatusCode != 422 || refusal.Error.Code != "invalid_stage" || !slices.Equal(refusal.Error.MappedStages, mapped) ||
		!strings.Contains(refusal.Error.Message, strings.Join(mapped, ", ")) {
		t.Fatalf("the README's move on XPM: %d %s", r.StatusCode, r.body)
	}
	out, err := g.cli("connect", "stage-map", "--firm", "frm_hollis", "--system", "xpm")
	if err != nil || !regexp.MustCompile(`Awaiting info\s+awaiting_client\s+suggested by its name`).MatchString(out) ||
		!strings.Contains(out, "No state maps to ready_to_start, in_review, awaiting_client_approval, filed") {
		t.Fatalf("the stage map shown: %v\n%s", err, out)
	}

	// The firm adds its own state in XPM and maps it; the gateway reads
	// the practice's states afresh at its next look (every ten minutes),
	// so the test restarts the gateway, which must keep nothing wrong.
	l.XPM.AddJobState("Partner sign-off")
	g.stop()
	g = startGateway(t, opts)
	for _, bad := range []struct{ set, says string }{
		{"Partner signoff=in_review", `--set Partner signoff=in_review: This firm's Xero Practice Manager has no job state "Partner signoff"`},
		{"Partner sign-off=review", `maps to "review", which is not a job stage`},
		{"Partner sign-off", `give STATE=STAGE`},
	} {
		out, err := g.cli("connect", "stage-map", "--firm", "frm_hollis", "--system", "xpm", "--set", bad.set)
		if err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("--set %q: %v\n%s", bad.set, err, out)
		}
	}
	eventually.NoError(t, 30*time.Second, 200*time.Millisecond, "the map to be set", func() error {
		out, err = g.cli("connect", "stage-map", "--firm", "frm_hollis", "--system", "xpm", "--set", "Partner sign-off=in_review")
		return err
	})
	if !regexp.MustCompile(`Partner sign-off\s+in_review\s+set by the firm`).MatchString(out) ||
		!strings.Contains(out, "No state maps to ready_to_start, awaiting_client_approval, filed") {
		t.Fatalf("the map edited:\n%s", out)
	}
	eventually.NoError(t, 10*time.Second, 100*time.Millisecond, "the move with the map edited", func() error {
		if r = move(); r.StatusCode != 200 {
			return fmt.Errorf("%d %s", r.StatusCode, r.body)
		}
		return nil
	})
	if stage := r.json(t)["stage"]; stage != "in_review" {
		t.Fatalf("the moved job: %s", r.body)
	}
	if got := l.XPM.Job(strings.TrimPrefix(job, "job_")).State; got != "Partner sign-off" {
		t.Fatalf("XPM's job is %q", got)
	}

	// Kept with the connection: a restarted gateway has it.
	g.stop()
	g = startGateway(t, opts)
	out, err = g.cli("connect", "stage-map", "--firm", "frm_hollis", "--system", "xpm", "--json")
	if err != nil || !strings.Contains(out, `"Partner sign-off": "in_review"`) {
		t.Fatalf("after a restart: %v\n%s", err, out)
	}
}
