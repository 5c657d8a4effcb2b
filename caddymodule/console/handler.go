// Package console serves the developer console at /console: a firm's
// administrators and integration developers sign in with an admin
// credential and see webhook delivery health, try requests against the
// sandbox, watch traffic against each credential's ceiling, and manage
// credentials. Pages are server-rendered from embedded templates and work
// without JavaScript; a little script makes the explorer and copy buttons
// nicer. Nothing is fetched from outside the gateway.
package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/internal/forwarded"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/credential"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler is the practicegw_console handler. It answers every request
// under /console and passes anything else on.
type Handler struct {
	// SessionTTL is how long a sign-in lasts. Default 12h.
	SessionTTL caddy.Duration `json:"session_ttl,omitempty"`

	firms      firms
	sandbox    sandbox
	usage      trafficSource
	syncs      syncs
	endpoints  endpointPages
	deliveries deliveryPages
	replays    replayer
	exports    exporter
	// connList and connChange are the app's connection service; nil on a
	// gateway that offers none (no connect block).
	connList   api.ConnectionReader
	connChange api.ConnectionWriter
	// demo says which roles a firm leaves to the demo records; nil
	// when the app does not say.
	demo demoRoles
	// counter counts the console's own requests in the signed-in
	// credential's traffic; nil when the app does not.
	counter  useCounter
	registry *auth.Registry
	logger   *zap.Logger
	sessions *sessions
	views    *views
	ops      []operation
	mux      *http.ServeMux
	now      func() time.Time
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.practicegw_console",
		New: func() caddy.Module { return new(Handler) },
	}
}

const defaultSessionTTL = 12 * time.Hour

// Provision finds the practicegw app, loads the templates and reads the
// API's routes for the explorer.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	h.now = time.Now
	if h.SessionTTL == 0 {
		h.SessionTTL = caddy.Duration(defaultSessionTTL)
	}
	app, err := ctx.App("practicegw")
	if err != nil {
		return fmt.Errorf("practicegw_console needs the practicegw app: %w", err)
	}
	deps, err := h.wire(app)
	if err != nil {
		return err
	}
	routes, err := api.Operations(deps.Deprecations())
	if err != nil {
		return fmt.Errorf("practicegw_console: %w", err)
	}
	h.ops = operationsOf(routes)
	if h.views, err = loadViews(h.now); err != nil {
		return fmt.Errorf("practicegw_console: %w", err)
	}
	if h.sessions, err = loadSessions(); err != nil {
		return fmt.Errorf("practicegw_console: %w", err)
	}
	h.mux = h.routes()
	return nil
}

// Validate refuses a sign-in too short to use.
func (h *Handler) Validate() error {
	if time.Duration(h.SessionTTL) < time.Minute {
		return fmt.Errorf("practicegw_console: session_ttl %s is under a minute", time.Duration(h.SessionTTL))
	}
	return nil
}

// Cleanup releases this config's hold on the session store.
func (h *Handler) Cleanup() error {
	if h.sessions != nil {
		if _, err := pool.Delete(poolKey); err != nil {
			return fmt.Errorf("practicegw_console: releasing sessions: %w", err)
		}
	}
	return nil
}

func (h *Handler) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /console/assets/{name}", h.asset)
	m.HandleFunc("GET /console/sign-in", h.public(h.signInPage))
	m.HandleFunc("POST /console/sign-in", h.public(h.signIn))
	m.HandleFunc("POST /console/sign-out", h.authed(h.signOut))

	m.HandleFunc("GET /console", h.authed(h.overview))
	m.HandleFunc("GET /console/{$}", h.authed(h.overview))

	m.HandleFunc("GET /console/webhooks", h.authed(h.webhooks))
	m.HandleFunc("GET /console/webhooks/{id}", h.authed(h.endpointPage))
	m.HandleFunc("POST /console/webhooks/{id}/status", h.authed(h.setStatus))
	m.HandleFunc("POST /console/webhooks/{id}/replay-failed", h.authed(h.replayFailed))
	m.HandleFunc("GET /console/webhooks/{id}/export.csv", h.authed(h.export))
	m.HandleFunc("GET /console/webhooks/{id}/export.ndjson", h.authed(h.export))
	m.HandleFunc("GET /console/deliveries/{id}", h.authed(h.deliveryPage))
	m.HandleFunc("POST /console/deliveries/{id}/replay", h.authed(h.replay))
	m.HandleFunc("GET /console/events/{id}", h.authed(h.eventPage))

	m.HandleFunc("GET /console/explorer", h.authed(h.explorer))
	m.HandleFunc("POST /console/explorer/send", h.authed(h.send))
	m.HandleFunc("POST /console/explorer/trigger", h.authed(h.trigger))

	m.HandleFunc("GET /console/traffic", h.authed(h.traffic))

	m.HandleFunc("POST /console/sync/{system}/resync", h.authed(h.resync))

	m.HandleFunc("GET /console/systems", h.authed(h.systems))
	m.HandleFunc("POST /console/systems/connect", h.authed(h.connectSystem))
	m.HandleFunc("POST /console/systems/{id}/choose", h.authed(h.chooseTenant))
	m.HandleFunc("POST /console/systems/{id}/reconnect", h.authed(h.reconnect))
	m.HandleFunc("GET /console/systems/{id}/disconnect", h.authed(h.disconnectPage))
	m.HandleFunc("POST /console/systems/{id}/disconnect", h.authed(h.disconnect))
	m.HandleFunc("GET /console/systems/{id}/stage-map", h.authed(h.stageMapPage))
	m.HandleFunc("POST /console/systems/{id}/stage-map", h.authed(h.editStageMap))

	m.HandleFunc("GET /console/access", h.authed(h.access))
	m.HandleFunc("POST /console/access/issue", h.authed(h.issue))
	m.HandleFunc("GET /console/access/{id}", h.authed(h.credentialPage))
	m.HandleFunc("GET /console/access/{id}/revoke", h.authed(h.revokePage))
	m.HandleFunc("POST /console/access/{id}/revoke", h.authed(h.revoke))

	// Anything else under /console, whatever the method, is a console 404.
	m.HandleFunc("/console/", h.public(h.notFound))
	return m
}

// ServeHTTP serves /console and everything under it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.URL.Path != "/console" && !strings.HasPrefix(r.URL.Path, "/console/") {
		return next.ServeHTTP(w, r)
	}
	forwarded.SetHSTS(w, r)
	hd := w.Header()
	// Pages show a firm's data: no cache may keep them, and nothing from
	// elsewhere may load into them or frame them.
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	// same-origin rather than no-referrer: with no-referrer browsers send
	// "Origin: null" on form posts, which the CSRF check refuses.
	hd.Set("Referrer-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
	return nil
}

// wire takes what the console uses from the practicegw app.
func (h *Handler) wire(app any) (deprecations, error) {
	src, ok := app.(App)
	if !ok {
		return nil, fmt.Errorf("practicegw_console: the practicegw app (%T) does not serve the console", app)
	}
	eng := src.WebhookEngine()
	h.firms, h.registry, h.sandbox, h.usage, h.syncs = src, src.Credentials(), src, src, src
	h.endpoints, h.deliveries, h.replays, h.exports = eng, eng, eng, eng
	h.demo, _ = app.(demoRoles)
	h.counter, _ = app.(useCounter)
	if cs, ok := app.(connectionSource); ok {
		if svc := cs.Connections(); svc != nil {
			h.connList, h.connChange = svc, svc
		}
	}
	return src, nil
}

// visit is a signed-in request: the session, its still-valid admin
// credential and the firm it administers.
type visit struct {
	sess session
	cred *credential.Credential
	firm Firm
	csrf string
}

func (v *visit) live() practice.Tenant    { return practice.Tenant{Firm: v.firm.ID} }
func (v *visit) sandbox() practice.Tenant { return practice.Tenant{Firm: v.firm.ID, Sandbox: true} }

// tenants are the firm's live and sandbox halves, in that order.
func (v *visit) tenants() []practice.Tenant { return []practice.Tenant{v.live(), v.sandbox()} }

type viewFunc func(w http.ResponseWriter, r *http.Request, v *visit) error

// public serves a page that needs no session.
func (h *Handler) public(fn viewFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r, nil); err != nil {
			h.fail(w, r, nil, err)
		}
	}
}

// authed serves a page to a signed-in administrator, checking on every
// request that the credential still stands, and checks CSRF on posts.
func (h *Handler) authed(fn viewFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := h.visit(r)
		switch {
		case errors.Is(err, errNoSession):
			h.toSignIn(w, r, err)
			return
		case errors.Is(err, errTampered), errors.Is(err, errExpired), errors.Is(err, errRevoked):
			h.clearSession(w, r)
			h.toSignIn(w, r, err)
			return
		case err != nil:
			// The credential store could not be asked: not the visitor's
			// fault, so their session stays.
			h.fail(w, r, nil, err)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
			if err := r.ParseForm(); err != nil {
				h.fail(w, r, v, pageErr(http.StatusBadRequest, "That form could not be read", "The form was too large or malformed."))
				return
			}
			if !sameOrigin(r) || !h.sessions.checkCSRF(v.sess.ID, r.PostForm.Get("csrf")) {
				h.fail(w, r, v, pageErr(http.StatusForbidden, "That form has expired",
					"Go back, reload the page and try again. (The form's security token did not match this session.)"))
				return
			}
		}
		if h.counter != nil {
			// The console's own requests are the credential's traffic.
			h.counter.CountUse(v.cred.ID)
		}
		if err := fn(w, r, v); err != nil {
			h.fail(w, r, v, err)
		}
	}
}

// visit reads and checks the session cookie and the credential behind it.
// A session whose credential was revoked, or which expired, ends here, and
// the explorer's sandbox credential with it.
func (h *Handler) visit(r *http.Request) (*visit, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, errNoSession
	}
	sess, err := h.sessions.decode(ck.Value, h.now())
	if errors.Is(err, errExpired) {
		h.endSession(r.Context(), sess.ID)
	}
	if err != nil {
		return nil, err
	}
	if !h.sessions.valid(sess) {
		return nil, errExpired
	}
	cred, err := h.registry.Get(r.Context(), sess.CredID)
	if err != nil && !errors.Is(err, credential.ErrNotFound) {
		return nil, fmt.Errorf("checking the console credential %s: %w", sess.CredID, err)
	}
	firm, ok := Firm{}, false
	if err == nil {
		firm, ok = h.firm(cred.Firm)
	}
	if !ok || !adminCredential(cred) {
		h.endSession(r.Context(), sess.ID)
		return nil, errRevoked
	}
	// The access log names the administrator, as it names the credential
	// of an API call.
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set("http.auth.user.id", cred.ID)
	}
	return &visit{sess: sess, cred: cred, firm: firm, csrf: h.sessions.csrf(sess.ID)}, nil
}

// endSession forgets a session and revokes its explorer credential.
func (h *Handler) endSession(ctx context.Context, id string) {
	if ex := h.sessions.end(id); ex != nil {
		h.revokeExplorer(ctx, ex)
	}
}

var errRevoked = errors.New("the console credential was revoked or lost the admin scope")

// adminCredential reports whether c may use the console.
func adminCredential(c *credential.Credential) bool {
	return c.RevokedAt == nil && !c.Sandbox && c.Allows("admin")
}

func (h *Handler) firm(id string) (Firm, bool) {
	name, ok := h.firms.FirmName(id)
	return Firm{ID: id, Name: name}, ok
}

// sameOrigin refuses a post whose Origin names another site. SameSite
// cookies already keep other sites' posts out; this covers old browsers.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// redirect answers a post with a redirect to a page (post/redirect/get),
// so that reloading the page does not repeat the action.
func redirect(w http.ResponseWriter, r *http.Request, to string) error {
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

// pageError is an error with a page of its own.
type pageError struct {
	Status  int
	Title   string
	Message string
}

func (e *pageError) Error() string { return e.Title + ": " + e.Message }

func pageErr(status int, title, message string) error {
	return &pageError{Status: status, Title: title, Message: message}
}

func notFound(what string) error {
	return pageErr(http.StatusNotFound, "Not found", "There is no "+what+" here for your firm.")
}

// fail renders an error page. Unexpected errors are logged, and the page
// says only that something went wrong.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, v *visit, err error) {
	var pe *pageError
	if !errors.As(err, &pe) {
		if e, ok := apierror.From(err); ok {
			// The API's answer to the same error, as a page.
			pe = &pageError{Status: e.Status, Title: http.StatusText(e.Status), Message: e.Message}
		}
	}
	if pe == nil {
		h.logger.Error("console page failed", zap.String("path", r.URL.Path), zap.Error(err))
		pe = &pageError{Status: http.StatusInternalServerError, Title: "Something went wrong",
			Message: "The console could not show this page. Try again; if it keeps happening, the gateway's log has the details."}
	}
	h.render(w, r, v, pe.Status, "error", pe.Title, pe)
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request, _ *visit) error {
	v, _ := h.visit(r)
	h.render(w, r, v, http.StatusNotFound, "error", "Page not found",
		&pageError{Status: http.StatusNotFound, Title: "Page not found", Message: "There is no console page at " + r.URL.Path + "."})
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
