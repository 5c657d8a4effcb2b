package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// stageMapAdmin answers the stage map route of one XPM records
// connection, noting the edits it was sent.
type stageMapAdmin struct{ edits []string }

func (a *stageMapAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "GET" && r.URL.Path == "/practicegw/connections/frm_hollis":
		json.NewEncoder(w).Encode(map[string]any{"data": []connection.View{
			{Connection: connection.Connection{ID: "con_l", Firm: "frm_hollis", Role: "ledger", System: "xero", Status: connection.Connected}},
			{Connection: connection.Connection{ID: "con_r", Firm: "frm_hollis", Role: "records", System: "xpm", Status: connection.Connected}}}})
	case r.URL.Path == "/practicegw/connections/frm_hollis/con_r/stage_map":
		set := map[string]string{}
		if r.Method == "PATCH" {
			var body struct {
				StageMap map[string]*string `json:"stage_map"`
			}
			json.NewDecoder(r.Body).Decode(&body)
			b, _ := json.Marshal(body.StageMap)
			a.edits = append(a.edits, string(b))
			if s := body.StageMap["Nope"]; s != nil {
				w.WriteHeader(400)
				w.Write([]byte(`{"error":"This firm's Xero Practice Manager has no job state \"Nope\"; its job states are \"Planned\".","code":"parameter_invalid","param":"stage_map"}`))
				return
			}
			set["Partner sign-off"] = "in_review"
		}
		json.NewEncoder(w).Encode(connection.StageMapView{Connection: "con_r", Firm: "frm_hollis", System: "xpm", SystemName: "Xero Practice Manager",
			States: []practice.StageState{{State: "Planned", Stage: "planned", Source: "suggested"}, {State: "Partner sign-off", Stage: set["Partner sign-off"], Source: map[bool]string{true: "set"}[len(set) > 0]}},
			Mapped: []string{"planned"}, Unmapped: []string{"ready_to_start", "in_review"}, Set: set})
	default:
		http.Error(w, `{"error":"no route"}`, 404)
	}
}

func TestStageMapCommand(t *testing.T) {
	admin := &stageMapAdmin{}
	srv := httptest.NewServer(admin)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	run := func(args ...string) (string, error) {
		return runCommand(t, stageMapCommand(), append([]string{"--admin", addr, "--firm", "frm_hollis"}, args...)...)
	}

	out, err := run("--system", "xpm")
	if err != nil || !strings.Contains(out, "The stage map of Xero Practice Manager for frm_hollis (con_r)") ||
		!strings.Contains(out, "suggested by its name") || !strings.Contains(out, "No state maps to ready_to_start, in_review") {
		t.Fatalf("show: %v\n%s", err, out)
	}
	out, err = run("--system", "xpm", "--set", "Partner sign-off=in_review", "--unmap", "On hold", "--reset", "Awaiting info")
	if err != nil || !strings.Contains(out, "set by the firm") ||
		admin.edits[0] != `{"Awaiting info":null,"On hold":"","Partner sign-off":"in_review"}` {
		t.Fatalf("edit: %v %v\n%s", err, admin.edits, out)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--system", "xpm", "--set", "Nope=in_review"}, `--set Nope=in_review: This firm's Xero Practice Manager has no job state "Nope"`},
		{[]string{"--system", "xpm", "--set", "Partner sign-off"}, `give STATE=STAGE`},
		{[]string{"--system", "xpm", "--set", "A=planned", "--unmap", "A"}, `edited twice`},
		{[]string{"--system", "karbon"}, `frm_hollis has no karbon connection; its records system is xpm`},
		{[]string{}, `--system or --connection is required`},
		{[]string{"--system", "xpm", "--connection", "con_r"}, `not both`},
	} {
		if _, err := run(tc.args...); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.says)
		}
	}
	if len(admin.edits) != 2 {
		t.Errorf("edits sent %v", admin.edits)
	}
}
