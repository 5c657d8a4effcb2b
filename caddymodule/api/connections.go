package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// Connection routes: a firm's administrator connects the firm's own
// systems (Karbon or XPM, Xero, a document store) and sees how each
// stands. They need the admin scope and a live credential: connections
// are the firm's real systems, which the sandbox never reaches.

// What the connection routes need of the connection service (the
// practicegw app's Connections), grouped by what a route does. The
// console's Systems page and the admin routes read and change
// connections through the same service, and so through these.
type (
	// ConnectionReader lists and reads a firm's connections.
	ConnectionReader interface {
		List(ctx context.Context, firm string) ([]connection.View, error)
		Get(ctx context.Context, firm, id string) (connection.View, error)
	}
	// ConnectionWriter makes, changes and ends a firm's connections.
	ConnectionWriter interface {
		Connect(ctx context.Context, firm string, r connection.Request) (connection.View, error)
		Update(ctx context.Context, firm, id string, r connection.Request) (connection.View, error)
		Disconnect(ctx context.Context, firm, id string) (connection.View, error)
	}
	// consentCallback starts a consent in the administrator's browser
	// (token is its start link's, browser the value of its
	// connect.BrowserCookie, "" when it has none) and finishes it when
	// the vendor redirects that browser back: q is the redirect's query
	// (state, code or error).
	consentCallback interface {
		Start(ctx context.Context, token, browser string) (connect.Started, error)
		Callback(ctx context.Context, q url.Values, browser string) (connection.View, error)
	}
)

// ConnectionService is what the practicegw app's Connections returns:
// the service that makes and keeps a firm's connections.
type ConnectionService interface {
	ConnectionReader
	ConnectionWriter
	consentCallback
}

// Optional parts of the practicegw app: a gateway without a `connect`
// block offers no connections, and the routes say so.
type (
	connectionSource interface {
		Connections() ConnectionService
	}
	// firmNames names a firm for the pages a browser is shown.
	firmNames interface {
		FirmName(firm string) (string, bool)
	}
)

var connectionStatuses = []string{string(connection.Pending), string(connection.ChooseOrganisation),
	string(connection.Connected), string(connection.NeedsReconnect), string(connection.Disconnected)}

// connectionSystemList is every system a role can be connected to: the
// systems whose modules can be connected (connect.Systems).
func connectionSystemList() []string {
	var out []string
	for _, s := range connect.Systems() {
		out = append(out, s.Name)
	}
	return out
}

// SystemName is a system's name as people know it, as its module says.
func SystemName(system string) string { return connect.Label(system) }

// OrganisationWord is the vendor's word for what a grant of system
// reaches ("site", "company", "organisation", "account").
func OrganisationWord(role, system string) string { return connect.OrganisationWord(role, system) }

// ConnectionRoles lists the roles a firm connects a system for, with the
// systems each takes, in the order pages show them.
func ConnectionRoles() []ConnectionRole {
	out := make([]ConnectionRole, len(connect.Roles))
	for i, r := range connect.Roles {
		out[i] = ConnectionRole{Role: r, Systems: connect.SystemNames(r)}
	}
	return out
}

// ConnectionRole is a role and the systems it can be connected to.
type ConnectionRole struct {
	Role    string
	Systems []string
}

// Connection is a connection as the API answers it.
type Connection struct {
	Object string `json:"object"`
	connection.View
}

// ConnectionList answers GET /v1/connections: every connection of the
// firm, disconnected ones included, on one page.
type ConnectionList struct {
	Object     string       `json:"object"`
	Data       []Connection `json:"data"`
	HasMore    bool         `json:"has_more"`
	NextCursor *string      `json:"next_cursor"`
}

// ConnectionCreate connects a system for a role.
type ConnectionCreate struct {
	Role   string `json:"role"`
	System string `json:"system"`
	// AccessKey is the firm's Karbon access key; Karbon only.
	AccessKey string `json:"access_key,omitempty"`
}

// ConnectionPatch chooses the organisation a grant reaches, or asks for
// a new consent (reconnect).
type ConnectionPatch struct {
	OrganisationID *string `json:"tenant_id"`
	Reconnect      *bool   `json:"reconnect"`
	// AccessKey replaces a Karbon connection's key, with reconnect.
	AccessKey *string `json:"access_key"`
}

const connectionsNote = "Only a live credential may: a sandbox credential is refused with 403."

var connectionRoutes = []route{
	{method: http.MethodGet, pattern: "/v1/connections", scope: "admin", op: "list_connections", tag: "connections",
		summary: "List the firm's connections to its own systems", schema: Connection{}, status: http.StatusOK,
		note: connectionsNote, serve: (*Handler).listConnections},
	{method: http.MethodPost, pattern: "/v1/connections", scope: "admin", op: "create_connection", tag: "connections",
		summary: "Connect a system for a role: answers the connection, pending with the gateway's single-use link to the vendor's " +
			"consent page (authorize_url), or connected at once for Karbon's access key",
		body: ConnectionCreate{}, schema: Connection{}, status: http.StatusCreated, note: connectionsNote,
		serve: (*Handler).createConnection},
	{method: http.MethodGet, pattern: "/v1/connections/{id}", scope: "admin", op: "get_connection", tag: "connections",
		summary: "Retrieve a connection", prefix: "con_", schema: Connection{}, status: http.StatusOK,
		note: connectionsNote, serve: (*Handler).getConnection},
	{method: http.MethodPatch, pattern: "/v1/connections/{id}", scope: "admin", op: "update_connection",
		tag: "connections", summary: "Choose the organisation (tenant_id) of a connection in choose_tenant, " +
			"or reconnect it (reconnect: true, with a new access_key for Karbon)",
		prefix: "con_", body: ConnectionPatch{}, schema: Connection{}, status: http.StatusOK, note: connectionsNote,
		serve: (*Handler).updateConnection},
	{method: http.MethodDelete, pattern: "/v1/connections/{id}", scope: "admin", op: "delete_connection",
		tag: "connections", summary: "Disconnect: revoke the grant at the vendor, remove the webhook subscriptions " +
			"the gateway made, stop the sync and purge its copy; answers the connection, disconnected",
		prefix: "con_", schema: Connection{}, status: http.StatusOK, note: connectionsNote,
		serve: (*Handler).deleteConnection},

	// The vendor's side: no credential, the start token and the browser's
	// cookie, the state (or the vendor's signature) are the proof.
	{method: http.MethodGet, pattern: "/connect/start/{token}", op: "start_consent", tag: "connections",
		summary: "The link authorize_url names ({public_url}/connect/start/<token>): binds the consent to the browser " +
			"that opens it with a cookie and redirects it to the vendor's consent page",
		status: http.StatusFound, note: startNote, serve: (*Handler).startConsent},
	{method: http.MethodGet, pattern: "/connect/callback", op: "connect_callback", tag: "connections",
		summary: "Where a vendor sends the administrator's browser back after consent ({public_url}/connect/callback)",
		query:   callbackParams, schema: Connection{}, status: http.StatusOK, note: callbackNote,
		serve: (*Handler).connectCallback},
}

var callbackParams = []param{
	{name: "state", typ: "string", desc: "The state the gateway sent with the consent request: single use, valid 10 minutes, " +
		"and only in the browser that opened the consent's start link (its practicegw_consent cookie)."},
	{name: "code", typ: "string", desc: "The vendor's authorization code."},
	{name: "error", typ: "string", desc: "The vendor's refusal, such as access_denied."},
}

const callbackNote = "Answers an HTML page to a browser (Accept: text/html), JSON otherwise: the connection, " +
	"400 invalid_state for a state that is unknown, used already or expired, or whose consent another browser started " +
	"(no practicegw_consent cookie, or another's: nothing is exchanged and the consent waits for the browser that started it), " +
	"400 consent_denied when the administrator refused consent at the vendor (error=access_denied), " +
	"502 upstream_unavailable when the vendor failed it (server_error, temporarily_unavailable or any other error)."

const startNote = "Single use and valid as long as its consent (10 minutes). Answers 302 to the vendor's consent page with " +
	"Set-Cookie: practicegw_consent (HttpOnly, SameSite=Lax, Path=/connect, Secure when public_url is https), which the " +
	"callback requires; a link opened already, expired or unknown is 400 invalid_state (a page to a browser)."

// connectionService is the app's connection service, or an error that
// says the gateway offers none.
func (h *Handler) connectionService() (ConnectionService, error) {
	if h.connections == nil {
		return nil, apierror.New(http.StatusNotFound, "resource_not_found",
			"This gateway offers no connections: its operator has configured no `connect` block.")
	}
	return h.connections, nil
}

// connectionsFor is the connection service for a call. A sandbox
// credential is refused: connections are the firm's real systems.
func (h *Handler) connectionsFor(c *call) (ConnectionService, error) {
	if c.tenant.Sandbox {
		return nil, apierror.New(http.StatusForbidden, "insufficient_scope",
			"Connections are the firm's real systems; send a live credential (pgw_live_...) with the admin scope.")
	}
	return h.connectionService()
}

func (h *Handler) listConnections(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noQuery(r.URL.RawQuery); err != nil {
		return err
	}
	svc, err := h.connectionsFor(c)
	if err != nil {
		return err
	}
	views, err := svc.List(r.Context(), c.tenant.Firm)
	if err != nil {
		return connectionError(c, err)
	}
	out := ConnectionList{Object: "list", Data: make([]Connection, 0, len(views))}
	for _, v := range views {
		out.Data = append(out.Data, connectionObject(v))
	}
	return readJSON(w, r, out)
}

func (h *Handler) getConnection(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noQuery(r.URL.RawQuery); err != nil {
		return err
	}
	svc, err := h.connectionsFor(c)
	if err != nil {
		return err
	}
	v, err := svc.Get(r.Context(), c.tenant.Firm, c.id)
	if err != nil {
		return connectionError(c, err)
	}
	return readJSON(w, r, connectionObject(v))
}

func (h *Handler) createConnection(w http.ResponseWriter, r *http.Request, c *call) error {
	svc, err := h.connectionsFor(c)
	if err != nil {
		return err
	}
	return h.writeConnection(w, r, c, func(ctx context.Context, body []byte) (connection.View, error) {
		var in ConnectionCreate
		if err := decodeBody(body, &in); err != nil {
			return connection.View{}, err
		}
		if err := in.validate(); err != nil {
			return connection.View{}, err
		}
		return svc.Connect(ctx, c.tenant.Firm, connection.Request{Role: in.Role, System: in.System, AccessKey: in.AccessKey})
	})
}

func (h *Handler) updateConnection(w http.ResponseWriter, r *http.Request, c *call) error {
	svc, err := h.connectionsFor(c)
	if err != nil {
		return err
	}
	return h.writeConnection(w, r, c, func(ctx context.Context, body []byte) (connection.View, error) {
		var in ConnectionPatch
		if err := decodeBody(body, &in); err != nil {
			return connection.View{}, err
		}
		req, err := in.request()
		if err != nil {
			return connection.View{}, err
		}
		return svc.Update(ctx, c.tenant.Firm, c.id, req)
	})
}

func (h *Handler) deleteConnection(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noQuery(r.URL.RawQuery); err != nil {
		return err
	}
	svc, err := h.connectionsFor(c)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if c.cred != nil {
		// The disconnected connection's reason names who disconnected it.
		ctx = connect.WithActor(ctx, connect.Actor{Name: c.cred.Name, Credential: c.cred.ID, Where: "through the API"})
	}
	v, err := svc.Disconnect(ctx, c.tenant.Firm, c.id)
	if err != nil {
		return connectionError(c, err)
	}
	return writeJSON(w, http.StatusOK, connectionObject(v))
}

// writeConnection runs a connection write with the body checks and
// Idempotency-Key of every write. The consent's start link is answered
// once: a replay of the key answers the same connection without it, so
// that the idempotency store keeps no usable link (a new one comes from a
// reconnect).
func (h *Handler) writeConnection(w http.ResponseWriter, r *http.Request, c *call,
	apply func(ctx context.Context, body []byte) (connection.View, error)) error {
	return h.writeKeeping(w, r, c, func(ctx context.Context, body []byte) (json.RawMessage, json.RawMessage, error) {
		v, err := apply(ctx, body)
		if err != nil {
			return nil, nil, h.notFoundFor(c, connectionError(c, err))
		}
		out, err := marshal(connectionObject(v))
		if err != nil {
			return nil, nil, err
		}
		v.AuthorizeURL = ""
		kept, err := marshal(connectionObject(v))
		return out, kept, err
	})
}

func connectionObject(v connection.View) Connection { return Connection{Object: "connection", View: v} }

// connectionError answers the connection store's errors in the
// contract's words; every other error goes through the one table.
func connectionError(c *call, err error) error {
	switch {
	case errors.Is(err, connection.ErrNotFound):
		return apierror.New(http.StatusNotFound, "resource_not_found",
			fmt.Sprintf("No such connection: %q.", c.id)).WithParam("id")
	case errors.Is(err, connection.ErrVersion), errors.Is(err, connection.ErrExists):
		return apierror.New(http.StatusConflict, "conflict",
			"The connection changed while this request was applied; fetch it and try again.")
	}
	return err
}

// validate checks that the role takes the system, and that an access key
// comes with Karbon and only with it.
func (in ConnectionCreate) validate() error {
	switch {
	case in.Role == "":
		return practice.Missing("role")
	case !slices.Contains(connect.Roles, in.Role):
		return invalidParam("role", "role must be one of %s.", strings.Join(connect.Roles, ", "))
	case in.System == "":
		return practice.Missing("system")
	}
	s, ok := connect.Lookup(in.Role, in.System)
	switch {
	case !ok || s.Role != in.Role:
		return invalidParam("system", "The %s role is connected to one of %s, not %q.",
			in.Role, strings.Join(connect.SystemNames(in.Role), ", "), in.System)
	case s.Key && in.AccessKey == "":
		return practice.Missing("access_key")
	case !s.Key && in.AccessKey != "":
		return invalidParam("access_key", "%s is connected through its consent page and takes no access_key.", s.Label)
	}
	return nil
}

// request is the patch as the service's request: a choice of tenant or
// a reconnection, never both.
func (in ConnectionPatch) request() (connection.Request, error) {
	switch {
	case in.OrganisationID != nil && in.Reconnect != nil:
		return connection.Request{}, invalidParam("reconnect",
			"Send either tenant_id (to choose the organisation) or reconnect, not both.")
	case in.OrganisationID != nil:
		if *in.OrganisationID == "" {
			return connection.Request{}, invalidParam("tenant_id", "tenant_id must name one of the connection's choices.")
		}
		if in.AccessKey != nil {
			return connection.Request{}, invalidParam("access_key", "access_key comes only with reconnect.")
		}
		return connection.Request{OrganisationID: *in.OrganisationID}, nil
	case in.Reconnect != nil:
		if !*in.Reconnect {
			return connection.Request{}, invalidParam("reconnect", "reconnect must be true; to disconnect, DELETE the connection.")
		}
		req := connection.Request{Reconnect: true}
		if in.AccessKey != nil {
			if *in.AccessKey == "" {
				return connection.Request{}, invalidParam("access_key", "access_key must not be empty.")
			}
			req.AccessKey = *in.AccessKey
		}
		return req, nil
	}
	return connection.Request{}, apierror.New(http.StatusBadRequest, "parameter_missing",
		"Send tenant_id (to choose the organisation) or reconnect: true.").WithParam("tenant_id")
}
