package e2e

import (
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Each consent asks for the least its role needs: for every system module
// the binary holds (list-modules) that a firm connects by a consent, the
// vendor's consent page the gateway's start link sends the browser to
// asks for the scopes config/README.md's table gives the role and system,
// no more and no fewer; a system connected by an access key asks for
// none. The Xero ledger's consent asks for no Practice Manager scope, and
// Xero Practice Manager's for no accounting one, though one app serves
// both; OneDrive's, where no site is chosen, for no site scope.
func TestConsentsAskForTheLeastTheirRoleNeeds(t *testing.T) {
	table := consentScopes(t)
	addr := freePort(t)
	g := startGateway(t, gatewayOptions{addr: addr, config: "../config/try-connections.Caddyfile",
		env: []string{"PRACTICEGW_PUBLIC_URL=http://" + addr}})
	admin := g.issue("frm_hollis", false, "admin").Token
	modules, code := runBinary(t, g.env, "list-modules")
	if code != 0 {
		t.Fatalf("list-modules: %s", modules)
	}
	asked := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^practicegw\.systems\.(records|ledger|documents)\.(\w+)$`).FindAllStringSubmatch(modules, -1) {
		role, system := m[1], m[2]
		r := g.do(t, "POST", "/v1/connections", admin, map[string]string{"role": role, "system": system})
		if r.StatusCode == 400 && r.errorParam(t) == "access_key" {
			continue // connected by the firm's access key, with no consent
		}
		if r.StatusCode != 201 {
			t.Fatalf("connecting %s as %s: %d %s", system, role, r.StatusCode, r.body)
		}
		conn := r.json(t)
		page, err := url.Parse(newConsentBrowser(t).start(t, conn["authorize_url"].(string)))
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Fields(page.Query().Get("scope"))
		want, ok := table[role+" "+system]
		switch {
		case !ok:
			t.Errorf("config/README.md's table of scopes has no row for %s as %s, whose consent asks for %q", system, role, got)
		case !sameSet(got, want):
			t.Errorf("%s as %s: the consent asks for %q; config/README.md says %q", system, role, got, want)
		}
		for _, s := range got {
			if role == "ledger" && strings.HasPrefix(s, "practicemanager") || role == "records" && strings.HasPrefix(s, "accounting.") ||
				system == "onedrive" && strings.HasPrefix(s, "Sites.") {
				t.Errorf("%s as %s asks for %s, which its role does not need", system, role, s)
			}
		}
		asked[role+" "+system] = true
		if r := g.do(t, "DELETE", "/v1/connections/"+conn["id"].(string), admin, nil); r.StatusCode != 200 {
			t.Fatalf("disconnecting %s: %d %s", system, r.StatusCode, r.body)
		}
	}
	for row := range table {
		if !asked[row] {
			t.Errorf("config/README.md's table of scopes has a row for %s, which no consent asked for", row)
		}
	}
	if len(asked) < 7 {
		t.Errorf("%d consents asked for scopes: %v", len(asked), asked)
	}
}

// consentScopes reads config/README.md's table of the scopes each consent
// asks for, by "role system".
func consentScopes(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../config/README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n### Scopes a consent asks for\n")
	if !ok {
		t.Fatal("config/README.md has no section Scopes a consent asks for")
	}
	section, _, _ = strings.Cut(section, "\n#")
	rows := regexp.MustCompile("(?m)^\\| `(\\w+)` \\| `(\\w+)` \\| `([^`]+)` \\|").FindAllStringSubmatch(section, -1)
	out := map[string][]string{}
	for _, r := range rows {
		out[r[1]+" "+r[2]] = strings.Fields(r[3])
	}
	if len(out) == 0 {
		t.Fatalf("no rows in config/README.md's table of scopes:\n%s", section)
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
