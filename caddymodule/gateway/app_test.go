package gateway

import (
	"testing"

	"github.com/caddyserver/caddy/v2"
)

func TestSettingFallsBackToItsVariableThenTheDefault(t *testing.T) {
	t.Setenv("PRACTICEGW_TEST_SETTING", "from-env")
	t.Setenv("PRACTICEGW_TEST_EMPTY", "")
	repl := caddy.NewReplacer()
	for _, tc := range []struct{ value, variable, want string }{
		{"configured", "PRACTICEGW_TEST_SETTING", "configured"},
		{"", "PRACTICEGW_TEST_SETTING", "from-env"},
		{"{env.PRACTICEGW_TEST_EMPTY}", "PRACTICEGW_TEST_SETTING", "from-env"},
		{"{env.PRACTICEGW_TEST_SETTING}", "PRACTICEGW_TEST_EMPTY", "from-env"},
		{"", "PRACTICEGW_TEST_EMPTY", "default"},
	} {
		if got := setting(repl, tc.value, tc.variable, "default"); got != tc.want {
			t.Errorf("setting(%q, %s) = %q, want %q", tc.value, tc.variable, got, tc.want)
		}
	}
}
