package firms

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// The receivers of vendor webhooks: each system's own, made once when it
// was opened (firmsystem.Opened.Webhook), which verifies the vendor's
// signature and raises change records into the sink the system was opened
// with. The front door (caddymodule/ingest) finds them here by address.

// maxAppWebhook bounds the body of an app's webhook read before its
// signature is checked, as the adapters' own receivers do.
const maxAppWebhook = 1 << 20

// IngestHandler is the vendor webhook receiver of a firm's Caddyfile
// system in role (records or ledger).
func (r *Runtime) IngestHandler(firm, role string) (http.Handler, error) {
	f := r.firm(firm)
	if f == nil {
		return nil, fmt.Errorf("no firm %q", firm)
	}
	for _, s := range f.systems {
		if s.role == role && s.opened.Webhook != nil {
			return s.opened.Webhook, nil
		}
	}
	return nil, fmt.Errorf("firm %s has no %s system that sends webhooks", firm, role)
}

// FirmWebhook is the receiver of the webhooks of the system named system
// that a firm's Caddyfile block names (/ingest/<firm>/<system>), in role
// order when a package serves two roles (records karbon, ledger karbon);
// false when the firm has no such system that receives webhooks.
func (r *Runtime) FirmWebhook(firm, system string) (http.Handler, bool) {
	f := r.firm(firm)
	if f == nil {
		return nil, false
	}
	for _, s := range f.systems {
		if s.name == system && s.opened.Webhook != nil {
			return s.opened.Webhook, true
		}
	}
	return nil, false
}

// ConnectionWebhook is the receiver of a connected system's vendor
// webhooks: with a connection's id, the webhooks of the subscriptions the
// gateway made for it (each has its own, and its signing key); with
// none, the one address of the connect block's app named system, whose
// deliveries carry events of every organisation connected through it
// (firmsystem.Deliveries). false when there is none here.
func (r *Runtime) ConnectionWebhook(system, connectionID string) (http.Handler, bool) {
	if connectionID != "" {
		for _, c := range r.liveConnections() {
			if c.conn.ID != connectionID || c.conn.System != system || c.opened.Webhook == nil {
				continue
			}
			// Only the subscriptions the gateway made deliver to a
			// connection's own address: its app's (Karbon's), or the
			// system's own (a Graph subscription, a Drive channel).
			_, byApp := r.app(c.app).(firmsystem.Subscriber)
			_, bySystem := c.opened.Reader.(readmodel.Subscriber)
			if byApp || bySystem {
				return c.opened.Webhook, true
			}
		}
		return nil, false
	}
	// Without its webhook key an app can check no delivery: the address
	// is not served, and it is answered as unknown.
	if app, ok := r.app(system).(firmsystem.Deliveries); ok && app.Receives() {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.appWebhook(w, req, system, app) }), true
	}
	return nil, false
}

// app is the connect block's app named name, nil when there is none.
func (r *Runtime) app(name string) any {
	if r.d.Connected == nil || name == "" {
		return nil
	}
	return r.d.Connected.App(name)
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
func (r *Runtime) appWebhook(w http.ResponseWriter, req *http.Request, name string, app firmsystem.Deliveries) {
	if ch, ok := app.(firmsystem.Challenger); ok && ch.Challenge(w, req) {
		return // the vendor's verification of the address (Dropbox's)
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxAppWebhook))
	if err != nil {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		return
	}
	orgs, err := app.Route(req.Header, body)
	if errors.Is(err, firmsystem.ErrUnsigned) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if err != nil {
		// Signed by the vendor yet unreadable: sending it again will
		// not help.
		r.logger.Error("vendor webhook payload unreadable", zap.String("app", name), zap.Error(err))
		w.WriteHeader(http.StatusOK)
		return
	}
	tenants := map[string]bool{}
	for _, o := range orgs {
		tenants[o] = true
	}
	status := http.StatusOK
	for _, c := range r.liveConnections() {
		// A connection that names no organisation reaches one account,
		// which its receiver knows (Dropbox's): it takes every delivery
		// of its app and reads what is its own.
		if c.app != name || c.opened.Webhook == nil || c.conn.OrganisationID != "" && !tenants[c.conn.OrganisationID] || c.paused() {
			continue
		}
		rec := &statusRecorder{header: http.Header{}, status: http.StatusOK}
		one := req.Clone(req.Context())
		one.Body = io.NopCloser(bytes.NewReader(body))
		one.ContentLength = int64(len(body))
		c.opened.Webhook.ServeHTTP(rec, one)
		if rec.status/100 != 2 && status == http.StatusOK {
			status = rec.status
		}
	}
	w.WriteHeader(status)
}

// statusRecorder keeps the status a connection's receiver answered; its
// body is nothing the vendor reads.
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
