package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/practicegw/practicegw/practice"
)

// route is one operation of /v1. The table below is the single source of
// the router, the scope check and the OpenAPI document.
type route struct {
	method  string
	pattern string // "/v1/jobs/{id}/stage"
	scope   string // "" for public routes
	op      string // OpenAPI operationId
	summary string
	kind    practice.Kind
	// prefix is the type prefix of the path's {id}; an id without it is
	// a 404 before any backend is asked.
	prefix string
	// tag groups the route in the OpenAPI document; schema is the success
	// body's type when it is not the kind's resource.
	tag    string
	schema any
	query  []param
	body   any // request body type, for validation and the schema
	status int // success status
	// note adds to the operation's description in the document.
	note string
	// stream marks a route that answers text/event-stream.
	stream bool
	serve  func(h *Handler, w http.ResponseWriter, r *http.Request, c *call) error
}

// param is a query parameter.
type param struct {
	name   string
	typ    string // string, enum, id, date-time, date, boolean, limit, cursor
	enum   []string
	prefix string // for typ id
	desc   string
}

var (
	pageParams = []param{
		{name: "limit", typ: "limit", desc: "Items per page, 1 to 200. Default 50."},
		{name: "cursor", typ: "cursor", desc: "The next_cursor of the previous page."},
		{name: "updated_since", typ: "date-time", desc: "Only records updated at or after this RFC 3339 time."},
		{name: includeDeleted, typ: "boolean", desc: "true also lists the tombstones of records removed from the firm's system " +
			`({"id","object","deleted":true,"deleted_at","version"}), kept 30 days, among the records in id order and paged with them; ` +
			"with updated_since, those deleted at or after it. Only updated_since, limit and cursor combine with it. " +
			"The sandbox's records are never removed, so it lists none there."},
	}
	clientFilters = []param{
		{name: "owner", typ: "id", prefix: "usr_", desc: "Only clients owned by this person."},
		{name: "status", typ: "enum", enum: practice.ClientStatuses, desc: "Only clients with this status."},
		{name: "last_activity_after", typ: "date-time", desc: "Only clients active at or after this time."},
		{name: "last_activity_before", typ: "date-time", desc: "Only clients last active before this time."},
	}
	jobFilters = []param{
		{name: "stage", typ: "enum", enum: practice.JobStages, desc: "Only jobs in this stage."},
		{name: "owner", typ: "id", prefix: "usr_", desc: "Only jobs owned by this person."},
		{name: "client", typ: "id", prefix: "cli_", desc: "Only jobs for this client."},
		{name: "deadline_after", typ: "date", desc: "Only jobs due on or after this date (YYYY-MM-DD)."},
		{name: "deadline_before", typ: "date", desc: "Only jobs due on or before this date (YYYY-MM-DD)."},
	}
)

func listRoute(k practice.Kind, filters ...param) route {
	return route{
		method: http.MethodGet, pattern: "/v1/" + string(k), scope: string(k) + ":read",
		op: "list_" + string(k), summary: "List " + string(k), kind: k,
		query: append(append([]param{}, pageParams...), filters...), status: http.StatusOK,
		serve: (*Handler).list,
	}
}

func getRoute(k practice.Kind) route {
	return route{
		method: http.MethodGet, pattern: "/v1/" + string(k) + "/{id}", scope: string(k) + ":read",
		op: "get_" + k.Singular(), summary: "Retrieve a " + k.Singular(), kind: k, prefix: k.IDPrefix(), status: http.StatusOK,
		serve: (*Handler).get,
	}
}

// routes is every /v1 operation.
var routes = slices.Concat(resourceRoutes, eventRoutes, connectionRoutes)

// resourceRoutes serve the practice's records.
var resourceRoutes = []route{
	{method: http.MethodGet, pattern: "/v1/openapi.json", op: "get_openapi", summary: "This API's OpenAPI 3.1 document",
		status: http.StatusOK, serve: (*Handler).openapi},

	listRoute(practice.Clients, clientFilters...),
	getRoute(practice.Clients),
	{method: http.MethodPost, pattern: "/v1/clients", scope: "clients:write", op: "create_client",
		summary: "Create a client", kind: practice.Clients, body: ClientCreate{}, status: http.StatusCreated,
		serve: (*Handler).createClient},
	{method: http.MethodPatch, pattern: "/v1/clients/{id}", scope: "clients:write", op: "update_client",
		summary: "Update a client; contacts, when sent, replace the list", kind: practice.Clients, prefix: "cli_",
		body: ClientPatch{}, status: http.StatusOK, serve: (*Handler).updateClient},

	listRoute(practice.Engagements),
	getRoute(practice.Engagements),

	listRoute(practice.Jobs, jobFilters...),
	getRoute(practice.Jobs),
	{method: http.MethodPost, pattern: "/v1/jobs", scope: "jobs:write", op: "create_job",
		summary: "Open a job", kind: practice.Jobs, body: JobCreate{}, status: http.StatusCreated,
		serve: (*Handler).createJob},
	{method: http.MethodPatch, pattern: "/v1/jobs/{id}", scope: "jobs:write", op: "update_job",
		summary: "Update a job (its stage moves only through /stage)", kind: practice.Jobs, prefix: "job_",
		body: JobPatch{}, status: http.StatusOK, serve: (*Handler).updateJob},
	{method: http.MethodPost, pattern: "/v1/jobs/{id}/stage", scope: "jobs:write", op: "move_job",
		summary: "Move a job to a stage, with an optional note", kind: practice.Jobs, prefix: "job_",
		body: practice.StageMove{}, status: http.StatusOK, serve: (*Handler).moveJob},

	listRoute(practice.Documents),
	getRoute(practice.Documents),
	listRoute(practice.Invoices),
	getRoute(practice.Invoices),
	listRoute(practice.People),
	getRoute(practice.People),
}

// noun names what the route's {id} identifies, for messages.
func (r *route) noun() string {
	if r.kind != "" {
		return r.kind.Singular()
	}
	switch r.prefix {
	case "evt_":
		return "event"
	case "we_":
		return "webhook endpoint"
	case "dlv_":
		return "delivery"
	case "con_":
		return "connection"
	}
	return "record"
}

// match finds the route for a path and method. It returns the route, the
// path's {id} (if any), and the methods the path allows when the method
// does not match.
func match(method, path string) (rt *route, id string, allow []string) {
	for i := range routes {
		r := &routes[i]
		v, ok := matchPattern(r.pattern, path)
		if !ok {
			continue
		}
		if r.method == method {
			return r, v, nil
		}
		// /v1/events/stream matches /v1/events/{id} too.
		if !slices.Contains(allow, r.method) {
			allow = append(allow, r.method)
		}
	}
	return nil, "", allow
}

// matchPattern matches path against a pattern whose one variable segment
// is {id} (or {token}, a consent's start link).
func matchPattern(pattern, path string) (string, bool) {
	var id string
	for {
		pseg, prest, pmore := strings.Cut(pattern, "/")
		seg, rest, more := strings.Cut(path, "/")
		if pmore != more {
			return "", false
		}
		if pseg == "{id}" || pseg == "{token}" {
			if seg == "" {
				return "", false
			}
			id = seg
		} else if pseg != seg {
			return "", false
		}
		if !more {
			return id, true
		}
		pattern, path = prest, rest
	}
}
