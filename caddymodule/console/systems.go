package console

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/store/connection"
)

// The Systems page: the firm's administrator connects the firm's own
// systems (Karbon or XPM, Xero, a document store), chooses the
// organisation a grant reaches, reconnects and disconnects them; and a
// banner on every page says when one needs reconnecting.

// What the Systems page needs of the app besides the connection service
// (the app's Connections, read and changed through api.ConnectionReader
// and api.ConnectionWriter).
type (
	// connectionSource is the app's optional connection service.
	connectionSource interface {
		Connections() api.ConnectionService
	}
	// registeredSystems is a connection service that says which systems
	// the operator registered an app for: only those are offered.
	registeredSystems interface {
		Registered(role string) []string
	}
	// demoRoles is an app that says which of a firm's roles its
	// configuration leaves to the demo records.
	demoRoles interface {
		DemoRoles(firm string) []string
	}
)

// systemRole is one role on the Systems page: its connection, if any,
// and the systems it can be connected to.
type systemRole struct {
	Role string
	// Title names the role once, as people do ("Records"), and About
	// says what it holds.
	Title, About string
	// Standing is the connection's badge and sentence; Word the vendor's
	// name for what its grant reaches ("site").
	Standing standing
	Word     string
	Systems  []systemChoice
	// Conn is the role's connection: the one in use, else the last one
	// disconnected; nil when the role was never connected.
	Conn *connection.View
	// CanConnect is true when nothing serves the role through a
	// connection (none, or only disconnected ones) nor through the
	// gateway's configuration.
	CanConnect bool
	// Configured names the system the Caddyfile sets for the role, which
	// takes precedence over a connection.
	Configured string
	// KeyLabel names the role's systems a firm connects with an access
	// key ("Karbon"), whose field the connect form then has.
	KeyLabel string
	// ConnKey is true when the role's connection takes an access key.
	ConnKey bool
	// Demo is true when the role, with no connection, serves the demo
	// records: made up, not the firm's.
	Demo bool
}

type systemChoice struct{ ID, Name string }

// roleTitles name each role once on the page, and say what it holds.
var roleTitles = map[string]struct{ title, about string }{
	"records":   {"Records", "The practice-management system: clients, jobs and people, and engagements where it keeps the proposals."},
	"ledger":    {"Ledger", "The ledger: invoices, and engagements from its quotes or estimates where the records system keeps none."},
	"documents": {"Documents", "The document store: the clients' documents, where they are filed."},
}

// systemsView is the Systems page.
type systemsView struct {
	Offered bool // the gateway offers connections (it has a connect block)
	Roles   []systemRole
	Waiting bool // a connection is pending or backfilling: the page refreshes
}

// statusClass colours a connection's status.
func statusClass(s connection.Status) string {
	switch s {
	case connection.Connected:
		return "ok"
	case connection.Pending, connection.ChooseOrganisation:
		return "warn"
	case connection.NeedsReconnect:
		return "bad"
	}
	return "idle"
}

func (h *Handler) systems(w http.ResponseWriter, r *http.Request, v *visit) error {
	view := systemsView{Offered: h.connList != nil}
	var conns []connection.View
	if h.connList != nil {
		var err error
		if conns, err = h.connList.List(r.Context(), v.firm.ID); err != nil {
			return err
		}
	}
	configured := map[string]string{}
	for _, st := range h.syncs.SyncStatus(v.firm.ID) {
		configured[st.Role] = st.Label
	}
	var demo []string
	if h.demo != nil {
		demo = h.demo.DemoRoles(v.firm.ID)
	}
	registered, _ := h.connList.(registeredSystems)
	statuses := h.syncs.SyncStatus(v.firm.ID)
	now := h.now()
	for _, role := range api.ConnectionRoles() {
		sr := systemRole{Role: role.Role, Title: roleTitles[role.Role].title, About: roleTitles[role.Role].about, CanConnect: true}
		systems := role.Systems
		if registered != nil {
			// Only what the operator registered can be connected.
			systems = registered.Registered(role.Role)
		}
		var keyed []string
		for _, s := range systems {
			sr.Systems = append(sr.Systems, systemChoice{ID: s, Name: api.SystemName(s)})
			if takesKey(role.Role, s) {
				keyed = append(keyed, api.SystemName(s))
			}
		}
		sr.KeyLabel = strings.Join(keyed, " or ")
		if c := roleConnection(conns, role.Role); c != nil {
			sr.Conn, sr.CanConnect, sr.ConnKey = c, c.Status == connection.Disconnected, takesKey(c.Role, c.System)
			sr.Standing, sr.Word = standingOf(*c, syncOf(*c, statuses), now), api.OrganisationWord(c.Role, c.System)
			view.Waiting = view.Waiting || c.Status == connection.Pending || backfilling(c)
		} else if label, ok := configured[role.Role]; ok {
			// A real system with no connection behind it: the Caddyfile's.
			sr.Configured, sr.CanConnect = label, false
		} else {
			sr.Demo = slices.Contains(demo, role.Role)
		}
		sr.CanConnect = sr.CanConnect && len(sr.Systems) > 0
		view.Roles = append(view.Roles, sr)
	}
	h.render(w, r, v, http.StatusOK, "systems", "Systems", view)
	return nil
}

// takesKey reports whether a firm connects system for role with an
// access key.
func takesKey(role, system string) bool {
	s, ok := connect.Lookup(role, system)
	return ok && s.Key
}

// roleConnection is the connection that stands for a role: one that is
// not disconnected, else the one disconnected last.
func roleConnection(conns []connection.View, role string) *connection.View {
	var best *connection.View
	for i := range conns {
		c := &conns[i]
		if c.Role != role {
			continue
		}
		if best == nil || rank(c) > rank(best) || (rank(c) == rank(best) && c.UpdatedAt.After(best.UpdatedAt)) {
			best = c
		}
	}
	return best
}

func rank(c *connection.View) int {
	if c.Status == connection.Disconnected {
		return 0
	}
	return 1
}

func backfilling(c *connection.View) bool {
	return slices.ContainsFunc(c.Sync, func(s connection.SyncStatus) bool { return s.State == "backfilling" })
}

// needsReconnect are the firm's connections whose grant the vendor
// refused, for the banner on every page. The banner is a courtesy: a
// service that cannot answer leaves it out rather than failing the page.
func (h *Handler) needsReconnect(ctx context.Context, firm string) []connection.View {
	if h.connList == nil {
		return nil
	}
	conns, err := h.connList.List(ctx, firm)
	if err != nil {
		h.logger.Warn("listing the firm's connections for the banner", zap.String("firm", firm), zap.Error(err))
		return nil
	}
	var out []connection.View
	for _, c := range conns {
		if c.Status == connection.NeedsReconnect {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b connection.View) int { return cmp.Compare(a.Role, b.Role) })
	return out
}

// connectSystem connects a system for a role and sends the browser on
// to the vendor's consent page (Karbon connects at once).
func (h *Handler) connectSystem(w http.ResponseWriter, r *http.Request, v *visit) error {
	if h.connChange == nil {
		return notFound("connection service")
	}
	req := connection.Request{Role: r.PostForm.Get("role"), System: r.PostForm.Get("system")}
	if takesKey(req.Role, req.System) {
		// The key field is on the role's form whichever system is
		// chosen; it is the keyed system's alone.
		req.AccessKey = r.PostForm.Get("access_key")
	}
	c, err := h.connChange.Connect(r.Context(), v.firm.ID, req)
	if err != nil {
		return h.connectionRefused(w, r, v, err)
	}
	h.logger.Info("console connected a system", zap.String("firm", v.firm.ID), zap.String("connection", c.ID),
		zap.String("system", c.System), zap.String("by", v.cred.ID))
	return h.afterChange(w, r, v, c)
}

// afterChange answers a connection waiting for consent with the step to
// its consent link, and sends anything else back to Systems with what
// happened. The step is the form's answer, not a page redirected to: the
// connection service answers the link (the gateway's single-use start
// link, which binds the consent to this browser and sends it on to the
// vendor) to Connect and Update alone, so no later request could show it.
func (h *Handler) afterChange(w http.ResponseWriter, r *http.Request, v *visit, c connection.View) error {
	if c.Status == connection.Pending && c.AuthorizeURL != "" {
		h.render(w, r, v, http.StatusOK, "consent", "Connect "+api.SystemName(c.System), consentView{
			Conn: c, System: api.SystemName(c.System)})
		return nil
	}
	h.sessions.addFlash(v.sess.ID, changeFlash(c))
	return redirect(w, r, "/console/systems")
}

func changeFlash(c connection.View) flash {
	name := api.SystemName(c.System)
	switch c.Status {
	case connection.Connected:
		text := name + " is connected"
		if c.OrganisationName != "" {
			text += ": the " + api.OrganisationWord(c.Role, c.System) + " " + c.OrganisationName
		}
		return flash{Kind: "ok", Text: text + ". Its records are being copied now."}
	case connection.ChooseOrganisation:
		word := api.OrganisationWord(c.Role, c.System)
		return flash{Kind: "warn", Text: name + " gave access to several " + word + "s: choose the one to read."}
	case connection.Disconnected:
		return flash{Kind: "ok", Text: name + " is disconnected: its access was revoked and its copy removed."}
	}
	return flash{Kind: "warn", Text: name + " is " + c.Status.Words() + "."}
}

// consentView is the step between the Connect button and the vendor: a
// link to the consent page, which the console's script follows at once. A
// redirect would do without the script, but the pages' CSP allows forms
// to lead only to the console.
type consentView struct {
	Conn   connection.View
	System string
}

func (h *Handler) chooseTenant(w http.ResponseWriter, r *http.Request, v *visit) error {
	tenant := r.PostForm.Get("tenant_id")
	if tenant == "" {
		h.sessions.addFlash(v.sess.ID, flash{Kind: "bad", Text: "Choose one first."})
		return redirect(w, r, "/console/systems")
	}
	return h.update(w, r, v, connection.Request{OrganisationID: tenant})
}

func (h *Handler) reconnect(w http.ResponseWriter, r *http.Request, v *visit) error {
	return h.update(w, r, v, connection.Request{Reconnect: true, AccessKey: r.PostForm.Get("access_key")})
}

func (h *Handler) update(w http.ResponseWriter, r *http.Request, v *visit, req connection.Request) error {
	if h.connChange == nil {
		return notFound("connection service")
	}
	c, err := h.connChange.Update(r.Context(), v.firm.ID, r.PathValue("id"), req)
	if err != nil {
		return h.connectionRefused(w, r, v, err)
	}
	h.logger.Info("console changed a connection", zap.String("firm", v.firm.ID), zap.String("connection", c.ID),
		zap.Bool("reconnect", req.Reconnect), zap.String("by", v.cred.ID))
	return h.afterChange(w, r, v, c)
}

// disconnectPage asks for confirmation before a disconnection.
func (h *Handler) disconnectPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	c, err := h.connection(r, v)
	if err != nil {
		return err
	}
	h.render(w, r, v, http.StatusOK, "disconnect", "Disconnect "+api.SystemName(c.System), consentView{
		Conn: c, System: api.SystemName(c.System)})
	return nil
}

func (h *Handler) disconnect(w http.ResponseWriter, r *http.Request, v *visit) error {
	if h.connChange == nil {
		return notFound("connection service")
	}
	ctx := r.Context()
	if v.cred != nil {
		// The disconnected connection's reason names who disconnected it.
		ctx = connect.WithActor(ctx, connect.Actor{Name: v.cred.Name, Credential: v.cred.ID, Where: "in the console"})
	}
	c, err := h.connChange.Disconnect(ctx, v.firm.ID, r.PathValue("id"))
	if err != nil {
		return h.connectionRefused(w, r, v, err)
	}
	h.logger.Info("console disconnected a system", zap.String("firm", v.firm.ID), zap.String("connection", c.ID),
		zap.String("by", v.cred.ID))
	return h.afterChange(w, r, v, c)
}

// connection is the path's connection of the signed-in firm.
func (h *Handler) connection(r *http.Request, v *visit) (connection.View, error) {
	if h.connList == nil {
		return connection.View{}, notFound("connection service")
	}
	c, err := h.connList.Get(r.Context(), v.firm.ID, r.PathValue("id"))
	if errors.Is(err, connection.ErrNotFound) {
		return c, notFound("such connection")
	}
	return c, err
}

// connectionRefused shows a refusal the administrator can act on (a role
// the Caddyfile sets, a key Karbon refused, a connection that changed)
// on the Systems page; anything else is the error page.
func (h *Handler) connectionRefused(w http.ResponseWriter, r *http.Request, v *visit, err error) error {
	if errors.Is(err, connection.ErrNotFound) {
		return notFound("such connection")
	}
	if errors.Is(err, connection.ErrVersion) {
		err = apierror.New(http.StatusConflict, "conflict", "The connection changed meanwhile; look at it again and retry.")
	}
	e, ok := apierror.From(err)
	if !ok || e.Status >= http.StatusInternalServerError {
		return err
	}
	h.sessions.addFlash(v.sess.ID, flash{Kind: "bad", Text: e.Message})
	return redirect(w, r, "/console/systems")
}
