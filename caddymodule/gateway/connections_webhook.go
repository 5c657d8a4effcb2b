package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/caddymodule/connect"
)

// maxAppWebhook bounds the body of an app's webhook read before its
// signature is checked, as the adapters' own receivers do.
const maxAppWebhook = 1 << 20

// ConnectionWebhook is the receiver of a connected system's vendor
// webhooks: with a connection's id, the webhooks of the subscriptions the
// gateway made for it (each has its own, and its signing key); with
// none, the one address of the connect block's app named system, whose
// deliveries carry events of every organisation connected through it
// (firmsystem.Deliveries). false when there is none here.
func (a *App) ConnectionWebhook(system, connectionID string) (http.Handler, bool) {
	if connectionID != "" {
		for _, c := range a.liveConnections() {
			if c.opened.ID != connectionID || c.opened.System != system || c.upstream.webhook == nil {
				continue
			}
			// Only the subscriptions the gateway made deliver to a
			// connection's own address.
			s, _ := connect.Lookup(c.opened.Role, system)
			if _, ok := a.Connect.App(s.App).(firmsystem.Subscriber); ok {
				return c.upstream.webhook(a.changes), true
			}
		}
		return nil, false
	}
	// Without its webhook key an app can check no delivery: the address
	// is not served, and it is answered as unknown.
	if app, ok := a.Connect.App(system).(firmsystem.Deliveries); ok && app.Receives() {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.appWebhook(w, r, system, app) }), true
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

// appWebhook checks a delivery's signature with the app named name (401
// when wrong: Xero's intent-to-receive check sends both kinds), then
// hands it to each connected connection through the app whose
// organisation one of its events names. Each connection's receiver reads
// its own organisation's events and checks the signature again. 200 when
// all took it; otherwise the first refusal, so that the vendor delivers
// again (a connection that took it already finds the body handled and
// answers at once). The events of a connection that waits for its
// administrator (needs_reconnect, a reconnect under way) are dropped: its
// sync catches up once it is reconnected, and one firm's paused
// connection must not fail the app's one webhook for every firm, which
// the vendor disables after enough failures.
func (a *App) appWebhook(w http.ResponseWriter, r *http.Request, name string, app firmsystem.Deliveries) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAppWebhook))
	if err != nil {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		return
	}
	orgs, err := app.Route(r.Header, body)
	if errors.Is(err, firmsystem.ErrUnsigned) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if err != nil {
		// Signed by the vendor yet unreadable: sending it again will
		// not help.
		a.logger.Error("vendor webhook payload unreadable", zap.String("app", name), zap.Error(err))
		w.WriteHeader(http.StatusOK)
		return
	}
	tenants := map[string]bool{}
	for _, o := range orgs {
		tenants[o] = true
	}
	status := http.StatusOK
	for _, c := range a.liveConnections() {
		if s, ok := connect.Lookup(c.opened.Role, c.opened.System); !ok || s.App != name || c.upstream.webhook == nil ||
			!tenants[c.opened.OrganisationID] || c.paused() {
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
