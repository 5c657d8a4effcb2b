package console

import (
	"net/http"
	"strings"
	"testing"
)

// The Access page's rate limit placeholder is the ceiling a credential
// issued without one gets.
func TestAccessPlaceholderIsTheDefaultRate(t *testing.T) {
	for env, want := range map[string]string{"": "7200/h", "600/m": "600/m"} {
		t.Setenv("PRACTICEGW_RATE_LIMIT", env)
		rg := newConsoleRig(t, "frm_acme", nil)
		w := rg.do(t, http.MethodGet, "/console/access", nil)
		if !strings.Contains(w.Body.String(), `placeholder="`+want+`"`) {
			t.Errorf("with PRACTICEGW_RATE_LIMIT=%q the page has no placeholder %s", env, want)
		}
	}
}
