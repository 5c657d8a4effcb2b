package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/webhooksig"
)

// maxXeroWebhook bounds the body of a Xero webhook read before its
// signature is checked, as the adapter's own receiver does.
const maxXeroWebhook = 1 << 20

// ConnectionWebhook is the receiver of a connected system's vendor
// webhooks: for "karbon", the Karbon connection named (each has its own
// subscriptions and signing key); for "xero", with no connection, the one
// route of the Xero app, whose deliveries carry events of every
// organisation that connected it. false when there is none here.
func (a *App) ConnectionWebhook(system, connectionID string) (http.Handler, bool) {
	switch system {
	case "karbon":
		for _, c := range a.liveConnections() {
			if c.opened.ID == connectionID && c.opened.System == "karbon" && c.upstream.webhook != nil {
				return c.upstream.webhook(a.changes), true
			}
		}
	case "xero":
		// Without a webhook key no delivery can be checked: the route is
		// not served, and the API answers it as unknown.
		if connectionID == "" && a.xeroWebhookKey() != "" {
			return http.HandlerFunc(a.xeroWebhook), true
		}
	}
	return nil, false
}

// liveConnections are every firm's connections open here.
func (a *App) liveConnections() []*connSystem {
	var out []*connSystem
	for _, f := range a.Firms {
		if b := a.firms[f.ID]; b != nil {
			out = append(out, b.connections()...)
		}
	}
	return out
}

// xeroWebhook checks a delivery's signature under the Xero app's webhook
// key (401 when wrong: Xero's intent-to-receive check sends both kinds),
// then hands it to each connection whose organisation one of its events
// names. Each connection's receiver reads its own organisation's events
// and checks the signature again. 200 when all took it; otherwise the
// first refusal, so that Xero delivers again (a connection that took it
// already finds the body handled and answers at once).
func (a *App) xeroWebhook(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxXeroWebhook))
	if err != nil {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		return
	}
	key := a.xeroWebhookKey()
	if key == "" || !webhooksig.ValidHMAC([]byte(key), body, r.Header.Get("x-xero-signature")) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var p struct {
		Events []struct {
			TenantID string `json:"tenantId"`
		} `json:"events"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		// Signed by Xero yet unreadable: sending it again will not help.
		a.logger.Error("xero webhook payload unreadable", zap.Error(err))
		w.WriteHeader(http.StatusOK)
		return
	}
	tenants := map[string]bool{}
	for _, e := range p.Events {
		tenants[e.TenantID] = true
	}
	status := http.StatusOK
	for _, c := range a.liveConnections() {
		if c.opened.System != "xero" && c.opened.System != "xpm" || c.upstream.webhook == nil || !tenants[c.opened.TenantID] {
			continue
		}
		rec := &statusRecorder{header: http.Header{}, status: http.StatusOK}
		req := r.Clone(r.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		c.upstream.webhook(a.changes).ServeHTTP(rec, req)
		if rec.status/100 != 2 && status == http.StatusOK {
			status = rec.status
		}
	}
	w.WriteHeader(status)
}

// xeroWebhookKey is the Xero app's webhook key, "" when none is
// registered.
func (a *App) xeroWebhookKey() string {
	if a.Connect == nil || a.Connect.Xero == nil {
		return ""
	}
	// The operator's secret, a placeholder ({env.X}, {file.X}) until read
	// here as the modules read theirs.
	return caddy.NewReplacer().ReplaceAll(a.Connect.Xero.WebhookKey, "")
}

// statusRecorder keeps the status a connection's receiver answered; its
// body is nothing Xero reads.
type statusRecorder struct {
	header http.Header
	status int
	wrote  bool
}

func (s *statusRecorder) Header() http.Header { return s.header }

func (s *statusRecorder) Write(b []byte) (int, error) {
	s.wrote = true
	return len(b), nil
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
}
