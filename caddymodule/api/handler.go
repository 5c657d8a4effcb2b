// Package api serves the /v1 REST API: routing, scope checks, strict
// parameter and body parsing, cursor paging, idempotent writes and the
// OpenAPI document. Records come from the firm's backends through the
// practicegw app.
package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/internal/forwarded"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/credential"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler is the practicegw_api handler. It ends the handler chain: every
// request it sees gets an answer, a JSON error if nothing else.
type Handler struct {
	// MaxBodyBytes caps request bodies. Default 1 MiB.
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`

	tenants     tenants
	idempotency IdempotencyStore
	sandbox     sandbox
	events      eventLog
	endpoints   endpointReader
	endpointsW  endpointWriter
	secrets     secretRotator
	deliveries  deliveryLog
	exports     deliveryExporter
	replays     replayer
	feed        eventFeed
	streams     *streams
	// connections is nil on a gateway that offers none (no connect
	// block); firms are an optional part of the app too.
	connections ConnectionService
	firms       firmNames
	// peers sends a request for a firm this instance does not hold to
	// one that does; nil when every instance holds every firm.
	peers peers

	cursors cursors
	// positions seals the event stream's ids; standing says whether a
	// stream's credential still stands.
	positions positions
	standing  credentialStanding

	logger  *zap.Logger
	metrics *metrics
	openAPI []byte
	notices map[*route]Deprecation
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.practicegw_api",
		New: func() caddy.Module { return new(Handler) },
	}
}

const defaultMaxBody = 1 << 20

// Provision finds the practicegw app and prepares the OpenAPI document.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if h.MaxBodyBytes == 0 {
		h.MaxBodyBytes = defaultMaxBody
	}
	app, err := ctx.App("practicegw")
	if err != nil {
		return fmt.Errorf("practicegw_api needs the practicegw app: %w", err)
	}
	if err := h.wire(app); err != nil {
		return err
	}
	if h.metrics, err = newMetrics(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	h.openAPI, err = openAPIDocument(h.notices)
	if err != nil {
		return err
	}
	h.streams = newStreams()
	// Event streams last until the client goes: they end when the server
	// starts to shut down, or a reload or exit would wait for them.
	if srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); ok {
		srv.RegisterOnShutdown(h.streams.close)
	}
	return nil
}

// Cleanup ends the event streams still open.
func (h *Handler) Cleanup() error {
	if h.streams != nil {
		h.streams.close()
	}
	return nil
}

// wire takes what the API uses from the practicegw app.
func (h *Handler) wire(app any) error {
	src, ok := app.(App)
	if !ok {
		return fmt.Errorf("practicegw_api: the practicegw app (%T) does not serve the API", app)
	}
	var err error
	if h.notices, err = deprecationNotices(src.Deprecations()); err != nil {
		return err
	}
	eng := src.WebhookEngine()
	h.tenants, h.idempotency, h.sandbox = src, src.Idempotency(), src
	h.cursors = cursors{key: src.CursorKey()}
	if h.positions, err = newPositions(src.CursorKey()); err != nil {
		return err
	}
	// Streams ask the registry whether their credential still stands;
	// without one (the app offers none) they hold what they opened with.
	if reg, ok := app.(auth.RegistryProvider); ok && reg.Credentials() != nil {
		h.standing = reg.Credentials()
	}
	h.events, h.endpoints, h.endpointsW, h.secrets = eng, eng, eng, eng
	h.deliveries, h.exports, h.replays, h.feed = eng, eng, eng, eng
	if cs, ok := app.(connectionSource); ok {
		h.connections = cs.Connections()
	}
	h.firms, _ = app.(firmNames)
	h.peers, _ = app.(peers)
	return nil
}

// Validate refuses a body cap that admits nothing.
func (h *Handler) Validate() error {
	if h.MaxBodyBytes < 0 {
		return fmt.Errorf("practicegw_api: max_body_bytes %d is negative", h.MaxBodyBytes)
	}
	return nil
}

// call is what a route handler needs of the request.
type call struct {
	route    *route
	id       string
	cred     *credential.Credential
	tenant   practice.Tenant
	backends Systems
}

// ServeHTTP routes the request. It never calls next: it is the API.
//
// In an error route (handle_errors) it answers the error being handled
// with the contract's body, so that a platform engineer's error routes can
// add to what a refusal carries and still answer as the contract says.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	apierror.RequestID(w)
	forwarded.SetHSTS(w, r)
	if e, ok := apierror.Handling(r); ok {
		apierror.Write(w, r, e)
		return nil
	}
	return h.answer(w, r, h.serve)
}

// answer serves r with serve, answering its error with the contract's
// body; a refusal (401, 403) is handed to the site's error routes where
// it has any.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, serve func(http.ResponseWriter, *http.Request) (string, error)) error {
	rec := &statusRecorder{ResponseWriter: w}
	op, err := serve(rec, r)
	var refused error
	if err != nil {
		e := h.toAPIError(r, err)
		if e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
			refused = apierror.Refuse(rec, r, e)
			if refused != nil {
				rec.status = e.Status
			}
		} else {
			apierror.Write(rec, r, e)
		}
	}
	h.metrics.observe(op, rec.status)
	return refused
}

// serve answers the request and names the operation it matched ("none"
// when it matched no route), for metrics.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) (string, error) {
	rt, err := h.route(w, r)
	if rt == nil {
		return "none", err
	}
	return rt.op, err
}

func (h *Handler) route(w http.ResponseWriter, r *http.Request) (*route, error) {
	path := r.URL.Path
	if len(path) > 1 && path[len(path)-1] == '/' {
		path = path[:len(path)-1]
	}
	if v, ok := versionOf(path); ok && v != "v1" {
		return nil, apierror.New(http.StatusNotFound, "unknown_api_version",
			fmt.Sprintf("There is no API version %q; this gateway serves /v1.", v))
	}
	rt, id, allow := match(r.Method, path)
	if rt == nil {
		if allow != nil {
			return nil, methodNotAllowed(r, path, allow)
		}
		return nil, apierror.New(http.StatusNotFound, "resource_not_found",
			fmt.Sprintf("Unrecognized request URL (%s %s).", r.Method, r.URL.Path))
	}
	if d, ok := h.notices[rt]; ok {
		writeDeprecation(d, w.Header())
	}
	c := &call{route: rt, id: id}
	if rt.scope != "" {
		cred, ok := auth.FromContext(r.Context())
		if !ok {
			return rt, apierror.New(http.StatusUnauthorized, "unauthenticated",
				"Send a valid credential as 'Authorization: Bearer <token>'.")
		}
		if !cred.Allows(rt.scope) {
			return rt, apierror.New(http.StatusForbidden, "insufficient_scope",
				fmt.Sprintf("This credential lacks the %s scope that %s %s needs.", rt.scope, rt.method, rt.pattern))
		}
		b, ok := h.tenants.Systems(practice.Tenant{Firm: cred.Firm, Sandbox: cred.Sandbox})
		if !ok {
			return rt, apierror.New(http.StatusForbidden, "insufficient_scope",
				fmt.Sprintf("Firm %s is not served by this gateway.", cred.Firm))
		}
		c.cred, c.backends = cred, b
		c.tenant = practice.Tenant{Firm: cred.Firm, Sandbox: cred.Sandbox}
		if rt.kind != "" && !rt.stream && h.peers != nil && !fromPeer(r) && h.peers.Forward(w, r, cred, rt.kind) {
			return rt, nil
		}
	}
	if id != "" && !strings.HasPrefix(id, rt.prefix) {
		return rt, apierror.New(http.StatusNotFound, "resource_not_found",
			fmt.Sprintf("No such %s: %q.", rt.noun(), id)).WithParam("id")
	}
	return rt, rt.serve(h, w, r, c)
}

// versionOf returns the version segment of a path like /v2/jobs.
func versionOf(path string) (string, bool) {
	seg, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if len(seg) < 2 || seg[0] != 'v' {
		return "", false
	}
	for _, c := range seg[1:] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return seg, true
}

func methodNotAllowed(r *http.Request, path string, allow []string) error {
	msg := fmt.Sprintf("%s is not allowed on %s; allowed: %s.", r.Method, path, strings.Join(allow, ", "))
	if strings.HasPrefix(path, "/v1/engagements") {
		msg = "Engagements are read-only: they are created and signed through the proposal and engagement-letter process, never through the API."
	} else if kind := strings.Split(strings.TrimPrefix(path, "/v1/"), "/")[0]; kind == "documents" || kind == "invoices" || kind == "people" {
		msg = fmt.Sprintf("%s are read-only through this API; %s is not allowed.", strings.ToUpper(kind[:1])+kind[1:], r.Method)
	}
	return apierror.New(http.StatusMethodNotAllowed, "method_not_allowed", msg).
		WithHeader("Allow", strings.Join(allow, ", "))
}

func writeDeprecation(d Deprecation, h http.Header) {
	h.Set("Deprecation", fmt.Sprintf("@%d", d.Since.Unix()))
	h.Set("Sunset", d.Sunset.UTC().Format(http.TimeFormat))
	if d.Link != "" {
		h.Set("Link", fmt.Sprintf("<%s>; rel=\"deprecation\"", d.Link))
	}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
