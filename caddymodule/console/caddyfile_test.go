package console

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("practicegw_console {\n session_ttl 2h\n}")); err != nil {
		t.Fatal(err)
	}
	if time.Duration(h.SessionTTL) != 2*time.Hour {
		t.Errorf("session_ttl %v", time.Duration(h.SessionTTL))
	}
	for _, bad := range []string{"practicegw_console extra", "practicegw_console {\n session_ttl\n}",
		"practicegw_console {\n session_ttl -1h\n}", "practicegw_console {\n colour blue\n}"} {
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
