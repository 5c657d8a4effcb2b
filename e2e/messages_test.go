package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every message is for a person: the fuzz corpus's bad inputs sent to the
// API's routes and the CLI's failures answer with sentences that hold no
// escaped HTML, no Go type or package name, no decoder offset, no JSON of
// another layer, and list choices as words.
func TestEveryMessageIsForAPerson(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issue("frm_acme", false, allReadWrite...).Token
	admin := g.issue("frm_acme", false, "admin").Token
	job := g.do(t, "GET", "/v1/jobs?limit=1", tok, nil).json(t)["data"].([]any)[0].(map[string]any)["id"].(string)
	checked := 0
	check := func(what string, status int, body []byte) {
		t.Helper()
		if status < 400 {
			return
		}
		checked++
		for _, p := range messageProblems(string(body)) {
			t.Errorf("%s answered %s: %s", what, p, body)
		}
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
			t.Errorf("%s answered %d without the contract's error body: %s", what, status, body)
		}
	}
	send := func(method, path, token string, body []byte) (int, []byte) {
		req, err := http.NewRequest(method, "http://"+g.addr+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	for _, in := range fuzzCorpus(t, "FuzzDecodeBody") {
		for _, route := range [][2]string{{"POST", "/v1/clients"}, {"POST", "/v1/jobs"}, {"PATCH", "/v1/jobs/" + job},
			{"POST", "/v1/jobs/" + job + "/stage"}, {"POST", "/v1/webhook_endpoints"}} {
			status, body := send(route[0], route[1], tok, []byte(in[0]))
			check(fmt.Sprintf("%s %s %q", route[0], route[1], in[0]), status, body)
		}
	}
	for _, in := range fuzzCorpus(t, "FuzzParseQuery") {
		for _, path := range []string{"/v1/jobs", "/v1/clients", "/v1/events", "/v1/webhook_endpoints"} {
			status, body := send("GET", path+"?"+in[0], tok, nil)
			check("GET "+path+"?"+in[0], status, body)
		}
	}
	for _, in := range fuzzCorpus(t, "FuzzConnectionInput") {
		status, body := send("POST", "/v1/connections", admin, []byte(in[0]))
		check(fmt.Sprintf("POST /v1/connections %q", in[0]), status, body)
	}
	for _, token := range []string{"", "pgw_live_nope", "Bearer x", tok[:len(tok)-2]} {
		status, body := send("GET", "/v1/jobs", token, nil)
		check(fmt.Sprintf("GET /v1/jobs with token %q", token), status, body)
	}
	status, body := send("GET", "/v1/jobs?stage=in_review", tok, nil)
	cursor := url.QueryEscape(mustJSON(t, body)["next_cursor"].(string))
	status, body = send("GET", "/v1/jobs?cursor="+cursor, tok, nil)
	check("a cursor without its filter", status, body)
	if checked < 150 {
		t.Fatalf("checked %d refusals; the corpus gives more", checked)
	}

	// The CLI's failures, as a person at the terminal reads them.
	nowhere := freePort(t)
	for _, args := range [][]string{
		{"credential", "revoke"},
		{"credential", "issue", "--firm", "frm_acme", "--name", "x", "--scopes", "jobs:reed"},
		{"credential", "issue", "--firm", "frm_nope", "--name", "x", "--scopes", "jobs:read"},
		{"credential", "issue", "--firm", "frm_acme"},
		{"credential", "issue", "--firm", "frm_acme", "--name", "x", "--scopes", "jobs:read", "--rate-limit", "lots"},
		{"credential", "revoke", "crd_nope"},
		{"sync", "status", "--firm", "frm_nope"},
		{"sync", "resync", "--firm", "frm_acme", "--system", "ledger"},
		{"trigger", "job.exploded", "--firm", "frm_acme"},
		{"trigger", "job.stage_changed", "--firm", "frm_nope"},
		{"connect", "--firm", "frm_acme", "--role", "boss", "--system", "xero"},
		{"connect", "list", "--firm", "frm_nope"},
		{"listen", "--forward-to", "http://localhost:3000/hooks"},
		{"listen", "--forward-to", "http://localhost:3000/hooks", "--token", "pgw_test_x", "--url", "http://" + nowhere},
		{"credential", "list", "--firm", "frm_acme", "--admin", nowhere},
	} {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(g.env, "PRACTICEGW_TOKEN=")
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("practicegw %s succeeded:\n%s", strings.Join(args, " "), out)
			continue
		}
		msg := string(out)
		if i := strings.LastIndex(msg, "Error: "); i >= 0 {
			msg = msg[i:]
		}
		for _, p := range messageProblems(msg) {
			t.Errorf("practicegw %s says %s: %s", strings.Join(args, " "), p, msg)
		}
	}
}

// messageProblems lists what keeps text from being a message for a person.
func messageProblems(s string) []string {
	var out []string
	for _, rule := range []struct {
		re   *regexp.Regexp
		what string
	}{
		{regexp.MustCompile(`\\u00(3c|3e|26)`), "escaped HTML"},
		{regexp.MustCompile(`\bGo [a-z*\[]|\b(practice|api|dispatcher|connection|json|jsontext|http|url|time|strconv|caddy|netip)\.[A-Z]\w*|\*[a-z]+\.[A-Z]|\bmap\[|\[\][a-z]|struct \{`), "a Go type or package"},
		{regexp.MustCompile(`offset \d+|\bjsontext:|\bjson: |strconv\.|parsing time "`), "a decoder's words"},
		{regexp.MustCompile(`caddy responded|HTTP \d{3}: \{|: \{"error"|\\"error\\"`), "another layer's JSON"},
		{regexp.MustCompile(`\[[a-z_.:]+( [a-z_.:]+)+\]`), "a Go list of choices"},
		{regexp.MustCompile(`dial tcp|connection refused|performing request`), "the dialer's words"},
	} {
		if m := rule.re.FindString(s); m != "" {
			out = append(out, fmt.Sprintf("%s (%q)", rule.what, m))
		}
	}
	return out
}

// The rules catch what the issue found.
func TestMessageProblemsCatchTheIssuesExamples(t *testing.T) {
	for _, bad := range []string{
		`{"error":{"message":"Send a valid credential as 'Authorization: Bearer \u003ctoken\u003e'."}}`,
		`cannot unmarshal JSON array into Go practice.ClientInput`,
		`jsontext: unexpected EOF after offset 12`,
		`"in_reviewed" is not a job stage; use one of [planned ready_to_start in_progress].`,
		`caddy responded with error: HTTP 400: {"error":"unknown firm \"frm_nope\""}`,
		`talking to the gateway at localhost:2019: performing request: dial tcp 127.0.0.1:2019: connect: connection refused`,
	} {
		if len(messageProblems(bad)) == 0 {
			t.Errorf("no problem found in %s", bad)
		}
	}
	for _, good := range []string{
		`"in_reviewed" is not a job stage; use one of planned, ready_to_start, in_progress.`,
		`The field "contacts.0.name" must be a string.`,
		`no gateway answers at localhost:2019 (its admin endpoint): start one with ` + "`practicegw run`",
	} {
		if p := messageProblems(good); len(p) != 0 {
			t.Errorf("%s: %v", good, p)
		}
	}
}

// fuzzCorpus reads a fuzz target's corpus in caddymodule/api/testdata:
// each entry's arguments, strings and byte slices as text.
func fuzzCorpus(t *testing.T, target string) [][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "caddymodule", "api", "testdata", "fuzz", target, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus for %s: %v", target, err)
	}
	var out [][]string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		var args []string
		for _, l := range lines[1:] {
			open := strings.IndexByte(l, '(')
			v, err := strconv.Unquote(l[open+1 : len(l)-1])
			if err != nil {
				t.Fatalf("%s: %q: %v", f, l, err)
			}
			args = append(args, v)
		}
		out = append(out, args)
	}
	return out
}

func mustJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return m
}
