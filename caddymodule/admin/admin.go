// Package admin is practicegw's routes on Caddy's admin endpoint
// (/practicegw/...), which the practicegw CLI talks to: credentials, the
// sandbox trigger, readiness with the errors behind it, the syncs and the
// connections. The admin endpoint listens on localhost by default; it is
// the operator's, not an integration's. Like every handler, it finds the
// practicegw app with Caddy's context and uses it through the small
// interfaces it declares (App).
package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/caddymodule/health"
	"github.com/practicegw/practicegw/caddymodule/ratelimit"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/credential"
	"github.com/practicegw/practicegw/store/usage"
)

func init() {
	caddy.RegisterModule(adminAPI{})
}

// What the admin routes need of the practicegw app, each its own small
// interface.
type (
	// credentials is the registry that issues, lists and revokes them.
	credentials interface {
		Credentials() *auth.Registry
	}
	// firms names the firms the gateway serves and says how each of
	// their roles is served.
	firmNames interface {
		FirmName(id string) (string, bool)
		Roles(firm string) []adminapi.RoleView
	}
	// trafficSource is a credential's usage against its ceiling.
	trafficSource interface {
		Traffic(ctx context.Context, c *credential.Credential, since time.Time) (usage.Traffic, bool, error)
	}
	// syncs are the firms' systems' syncs; system is a sync's role or
	// system.
	syncs interface {
		SyncStatus(firm string) []readmodel.Status
		Resync(ctx context.Context, firm, system string) error
	}
	// sandbox makes sandbox changes that raise events.
	sandbox interface {
		Trigger(ctx context.Context, firm, kind string) (adminapi.Triggered, error)
	}
	// connections is the app's connection service, nil when its
	// configuration has no connect block.
	connections interface {
		Connections() api.ConnectionService
	}
)

// App is all the admin routes ask of the practicegw app; the app's
// package asserts at compile time that it provides it.
type App interface {
	credentials
	firmNames
	trafficSource
	syncs
	sandbox
	health.Checker
	connections
}

// adminAPI adds practicegw's management routes to Caddy's admin endpoint.
type adminAPI struct {
	app App
}

func (adminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.practicegw",
		New: func() caddy.Module { return new(adminAPI) },
	}
}

// Provision finds the running practicegw app, if the config has one.
func (a *adminAPI) Provision(ctx caddy.Context) error {
	app, err := ctx.AppIfConfigured("practicegw")
	if err != nil {
		return nil // a config without practicegw has no practicegw routes to serve
	}
	var ok bool
	if a.app, ok = app.(App); !ok {
		return fmt.Errorf("admin.api.practicegw: the practicegw app (%T) does not serve the admin routes", app)
	}
	return nil
}

// Routes implements caddy.AdminRouter.
func (a *adminAPI) Routes() []caddy.AdminRoute {
	routes := []caddy.AdminRoute{
		{Pattern: "/practicegw/credentials", Handler: caddy.AdminHandlerFunc(a.credentials)},
		{Pattern: "/practicegw/credentials/", Handler: caddy.AdminHandlerFunc(a.credential)},
		{Pattern: "/practicegw/trigger", Handler: caddy.AdminHandlerFunc(a.trigger)},
		{Pattern: "/practicegw/readiness", Handler: caddy.AdminHandlerFunc(a.readiness)},
		{Pattern: "/practicegw/sync/", Handler: caddy.AdminHandlerFunc(a.sync)},
	}
	service := func() connectionService {
		if a.app == nil {
			return nil
		}
		if svc := a.app.Connections(); svc != nil {
			return svc
		}
		return nil
	}
	known := func(firm string) bool {
		if a.app == nil {
			return false
		}
		_, ok := a.app.FirmName(firm)
		return ok
	}
	return append(routes, connectionAdminRoutes(service, known)...)
}

// readiness is /readyz with the errors behind each failing check, for the
// operator: the public probe leaves them out.
func (a *adminAPI) readiness(w http.ResponseWriter, r *http.Request) error {
	if a.app == nil {
		return notConfigured()
	}
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	type checkView struct {
		health.Check
		Error string `json:"error,omitempty"`
	}
	var out []checkView
	for _, c := range a.app.Readiness(ctx) {
		v := checkView{Check: c}
		if c.Err != nil {
			v.Error = c.Err.Error()
		}
		out = append(out, v)
	}
	return writeJSON(w, http.StatusOK, map[string]any{"checks": out})
}

func (a *adminAPI) credentials(w http.ResponseWriter, r *http.Request) error {
	if a.app == nil {
		return notConfigured()
	}
	switch r.Method {
	case http.MethodPost:
		var req auth.IssueRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return badRequest(fmt.Errorf("reading credential request: %w", err))
		}
		if _, ok := a.app.FirmName(req.Firm); !ok {
			return unknownFirm(w)
		}
		if req.RateLimit != "" {
			if _, err := ratelimit.ParseRate(req.RateLimit); err != nil {
				return refuse(w, http.StatusBadRequest, "parameter_invalid", "rate_limit", err.Error())
			}
		}
		c, token, err := a.app.Credentials().Issue(r.Context(), req)
		if err != nil {
			// The registry refuses scopes it does not know, or none.
			return refuse(w, http.StatusBadRequest, "parameter_invalid", "scopes", err.Error())
		}
		return writeJSON(w, http.StatusCreated, adminapi.IssuedCredential{ID: c.ID, Token: token, Firm: c.Firm,
			Name: c.Name, Scopes: c.Scopes, Sandbox: c.Sandbox, RateLimit: c.RateLimit})
	case http.MethodGet:
		firm := r.URL.Query().Get("firm")
		if _, ok := a.app.FirmName(firm); firm != "" && !ok {
			return unknownFirm(w)
		}
		creds, err := a.app.Credentials().List(r.Context(), firm)
		if err != nil {
			return err
		}
		now := time.Now()
		views := make([]adminapi.CredentialView, 0, len(creds))
		for _, c := range creds {
			v := adminapi.CredentialView{Credential: c, Stale: c.RevokedAt == nil && c.Stale(now)}
			if tr, ok, err := a.app.Traffic(r.Context(), c, now.Add(-24*time.Hour)); err != nil {
				return err
			} else if ok {
				v.Traffic = &tr
			}
			views = append(views, v)
		}
		return writeJSON(w, http.StatusOK, map[string]any{"data": views, "roles": a.app.Roles(firm)})
	default:
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
}

func (a *adminAPI) credential(w http.ResponseWriter, r *http.Request) error {
	if a.app == nil {
		return notConfigured()
	}
	id, action, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/practicegw/credentials/"), "/")
	var (
		c   *credential.Credential
		err error
	)
	switch {
	case r.Method == http.MethodGet && action == "":
		c, err = a.app.Credentials().Get(r.Context(), id)
	case (r.Method == http.MethodDelete && action == "") || (r.Method == http.MethodPost && action == "revoke"):
		c, err = a.app.Credentials().Revoke(r.Context(), id)
	default:
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no route %s %s", r.Method, r.URL.Path)}
	}
	if errors.Is(err, credential.ErrNotFound) {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("credential %q not found", id)}
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, adminapi.CredentialView{Credential: c, Stale: c.RevokedAt == nil && c.Stale(time.Now())})
}

func (a *adminAPI) trigger(w http.ResponseWriter, r *http.Request) error {
	if a.app == nil {
		return notConfigured()
	}
	if r.Method != http.MethodPost {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	var req struct {
		Firm  string `json:"firm"`
		Event string `json:"event"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return badRequest(fmt.Errorf("reading trigger request: %w", err))
	}
	if _, ok := a.app.FirmName(req.Firm); !ok {
		return unknownFirm(w)
	}
	t, err := a.app.Trigger(r.Context(), req.Firm, req.Event)
	if e, ok := apierror.From(err); ok && err != nil && e.Status < http.StatusInternalServerError {
		return refuse(w, e.Status, e.Code, e.Param, e.Message)
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, t)
}

func syncViewOf(st readmodel.Status, now time.Time) adminapi.SyncView {
	v := adminapi.SyncView{Firm: st.Firm, Role: st.Role, System: st.System, State: st.State, Why: st.Reason(),
		Holder: st.Holder, HeldBy: st.HeldBy, ConfirmedAt: st.ConfirmedAt, Progress: st.Progress(),
		CallsLastHour: st.CallsLastHour, BudgetPerHour: st.BudgetPerHour, Kinds: []adminapi.SyncKindView{},
		Plan: st.Plan.String(), PlanCalls: st.Plan.CallsPerPeriod, PlanLimit: st.Plan.Limit}
	if st.Plan.Limit > 0 {
		v.PlanShare, v.PlanPeriod = int(st.Plan.Share*float64(st.Plan.Limit)), st.Plan.Period.String()
	}
	if !st.ConfirmedAt.IsZero() {
		age := int64(st.Age(now) / time.Second)
		v.AgeSeconds = &age
	}
	for _, k := range st.Kinds {
		every := st.Plan.PollEvery[string(k.Kind)]
		if len(st.Plan.PollEvery) == 1 && st.Plan.PollEvery["feed"] > 0 {
			every = st.Plan.PollEvery["feed"]
		}
		v.Kinds = append(v.Kinds, adminapi.SyncKindView{Kind: k.Kind, Backfilled: k.Backfilled, Seen: k.Seen, About: k.About,
			Records: k.Records, ConfirmedAt: k.ConfirmedAt, PollSeconds: int64(every / time.Second), Unusable: k.Unusable,
			Notified: k.Notified, Reaches: st.Reaches(k.Kind)})
	}
	for _, u := range st.Unusable {
		v.Unusable = append(v.Unusable, adminapi.UnusableView{Kind: u.Kind, ID: u.ID, Reason: u.Reason})
	}
	v.Notifications = st.Latency.Count
	if st.Latency.Count > 0 {
		v.NotifiedP50Millis, v.NotifiedP99Millis = st.Latency.P50.Milliseconds(), st.Latency.P99.Milliseconds()
	}
	v.SubscribedUntil = st.SubscribedUntil
	if st.SubscribeError != "" {
		v.SubscribeError = readmodel.Plainly(cmp.Or(st.Label, st.System), st.SubscribeError)
	}
	if l := st.Links; l != nil {
		v.Links = &adminapi.LinksView{Of: l.Of, Records: l.In, Candidates: l.Candidates, Linked: l.Linked,
			Missing: l.Missing, Ambiguous: l.Ambiguous, Summary: l.String()}
	}
	return v
}

// sync answers GET /practicegw/sync/{firm}, each of the firm's real
// systems' sync and how each of its roles is served (roles), and POST /practicegw/sync/{firm}/{system}/resync, which
// asks one to compare every record with its vendor now.
func (a *adminAPI) sync(w http.ResponseWriter, r *http.Request) error {
	if a.app == nil {
		return notConfigured()
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/practicegw/sync/"), "/")
	firm := parts[0]
	switch {
	case len(parts) == 1 && firm != "":
		if r.Method != http.MethodGet {
			return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
		}
	case len(parts) == 3 && firm != "" && parts[1] != "" && parts[2] == "resync":
		if r.Method != http.MethodPost {
			return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
		}
	default:
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no route %s %s", r.Method, r.URL.Path)}
	}
	if _, ok := a.app.FirmName(firm); !ok {
		return unknownFirm(w)
	}
	now := time.Now()
	if len(parts) == 1 {
		views := []adminapi.SyncView{}
		for _, st := range a.app.SyncStatus(firm) {
			views = append(views, syncViewOf(st, now))
		}
		return writeJSON(w, http.StatusOK, map[string]any{"data": views, "roles": a.app.Roles(firm)})
	}
	system := parts[1]
	err := a.app.Resync(r.Context(), firm, system)
	if errors.Is(err, practice.ErrNotFound) {
		return refuse(w, http.StatusNotFound, "resource_not_found", "system",
			"The firm has no real system of that role or name syncing; practicegw sync status lists those it has.")
	}
	if err != nil {
		return err
	}
	for _, st := range a.app.SyncStatus(firm) {
		if st.Role == system || st.System == system {
			// Accepted: the instance that runs the sync takes the request
			// up at its next step.
			return writeJSON(w, http.StatusAccepted, syncViewOf(st, now))
		}
	}
	return writeJSON(w, http.StatusAccepted, adminapi.SyncView{Firm: firm, Role: system, Kinds: []adminapi.SyncKindView{}})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

func badRequest(err error) error { return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err} }

// refuse answers a refusal of what the request asked: the sentence, with
// the contract's code and the parameter it names, which the CLI says in
// the words of its flags.
func refuse(w http.ResponseWriter, status int, code, param, message string) error {
	return writeJSON(w, status, adminapi.Refusal{Error: message, Code: code, Param: param})
}

// unknownFirm refuses a firm the gateway does not serve, whichever route
// names it.
func unknownFirm(w http.ResponseWriter) error {
	return refuse(w, http.StatusNotFound, "resource_not_found", "firm",
		"This gateway serves no such firm; the firm blocks of its Caddyfile name the firms it serves.")
}

func notConfigured() error {
	return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: errors.New("the running config has no practicegw app")}
}

var (
	_ caddy.AdminRouter = (*adminAPI)(nil)
	_ caddy.Provisioner = (*adminAPI)(nil)
)
