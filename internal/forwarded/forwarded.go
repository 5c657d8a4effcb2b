// Package forwarded tells what the client's own request looked like when
// practicegw sits behind a TLS-terminating load balancer, trusting only
// what Caddy's trusted_proxies allows: a forwarded header from any other
// peer is the client's to forge.
package forwarded

import (
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// HTTPS reports whether the client reached the gateway over HTTPS: the
// connection itself is TLS, or a peer the server's trusted_proxies names
// forwarded a request that arrived as https.
func HTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
	return trusted && strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}

// hsts is the Strict-Transport-Security value sent on answers to HTTPS
// requests: browsers keep to HTTPS for a year, subdomains left to the
// operator.
const hsts = "max-age=31536000"

// SetHSTS adds Strict-Transport-Security to an answer to an HTTPS request.
func SetHSTS(w http.ResponseWriter, r *http.Request) {
	if HTTPS(r) {
		w.Header().Set("Strict-Transport-Security", hsts)
	}
}
