package forwarded

import (
	"context"
	"crypto/tls"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Only a trusted proxy's X-Forwarded-Proto counts: anyone else can send
// the header.
func TestHTTPS(t *testing.T) {
	for _, tt := range []struct {
		name    string
		tls     bool
		trusted bool
		proto   string
		want    bool
	}{
		{"plain", false, false, "", false},
		{"tls", true, false, "", true},
		{"trusted proxy, https", false, true, "https", true},
		{"trusted proxy, http", false, true, "http", false},
		{"untrusted peer says https", false, false, "https", false},
	} {
		r := httptest.NewRequest("GET", "/v1/jobs", nil)
		if tt.tls {
			r.TLS = &tls.ConnectionState{}
		}
		r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
		caddyhttp.SetVar(r.Context(), caddyhttp.TrustedProxyVarKey, tt.trusted)
		if tt.proto != "" {
			r.Header.Set("X-Forwarded-Proto", tt.proto)
		}
		if got := HTTPS(r); got != tt.want {
			t.Errorf("%s: HTTPS = %v, want %v", tt.name, got, tt.want)
		}
		w := httptest.NewRecorder()
		SetHSTS(w, r)
		if got := w.Header().Get("Strict-Transport-Security") != ""; got != tt.want {
			t.Errorf("%s: hsts sent %v, want %v", tt.name, got, tt.want)
		}
	}
}
