package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

func (h *Handler) openapi(w http.ResponseWriter, r *http.Request, _ *call) error {
	if r.URL.RawQuery != "" {
		if err := noQuery(r.URL.RawQuery); err != nil {
			return err
		}
	}
	writeBody(w, http.StatusOK, h.openAPI)
	return nil
}

// resourceTypes maps each kind to the Go type whose JSON it serves.
var resourceTypes = map[practice.Kind]any{
	practice.Clients:     practice.Client{},
	practice.Engagements: practice.Engagement{},
	practice.Jobs:        practice.Job{},
	practice.Documents:   practice.Document{},
	practice.Invoices:    practice.Invoice{},
	practice.People:      practice.Person{},
}

// enums documents the closed vocabularies of string fields, by
// "Type.json_name".
var enums = map[string][]string{
	"Job.stage":             practice.JobStages,
	"StageMove.stage":       practice.JobStages,
	"Document.kind":         practice.DocumentKinds,
	"Location.provider":     practice.DocumentProviders,
	"Invoice.status":        practice.InvoiceStatuses,
	"Client.status":         practice.ClientStatuses,
	"ClientCreate.status":   practice.ClientStatuses,
	"ClientPatch.status":    practice.ClientStatuses,
	"Client.type":           practice.ClientTypes,
	"ClientCreate.type":     practice.ClientTypes,
	"ClientPatch.type":      practice.ClientTypes,
	"Engagement.status":     practice.EngagementStatuses,
	"Tombstone.object":      tombstoneObjects(),
	"Connection.status":     connectionStatuses,
	"Connection.role":       connect.Roles,
	"ConnectionCreate.role": connect.Roles,
	"ConnectionList.object": {"list"},
	"SyncStatus.state":      {"backfilling", "live", "lagging", "failing", "paused"},
}

// enum is the closed vocabulary of a field, if it has one. The systems a
// firm can connect are those whose modules the build registers, read when
// the document is built (a system of two roles is listed once).
func enum(key string) []string {
	switch key {
	case "Connection.system", "ConnectionCreate.system":
		var out []string
		for _, s := range connectionSystemList() {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out
	}
	return enums[key]
}

// The writes whose create and update read one Go type have a schema each
// in the document, so that a generated client knows what a create
// requires (markRequired) and an update does not.
type (
	ClientCreate practice.ClientInput
	ClientPatch  practice.ClientInput
	JobCreate    practice.JobInput
	JobPatch     practice.JobInput
)

// tombstoneObjects are the object names a tombstone can carry: every
// resource's.
func tombstoneObjects() []string {
	out := make([]string, len(practice.Kinds))
	for i, k := range practice.Kinds {
		out[i] = k.Singular()
	}
	return out
}

// unknowns says, of each record field some system may leave unknown (a
// pointer in the record's Go type, so null in the document), which
// systems leave it null and when. Nothing in a record is made up: such a
// field is still present, null rather than empty or a stand-in.
var unknowns = map[string]string{
	"Client.owner": "The person at the firm who owns the client. Null when its system names none: Karbon, a client with no client owner; " +
		"Xero Practice Manager, a client with neither account manager nor job manager.",
	"Client.created_at": "When the client was created in its system. Null where the system publishes no creation time: " +
		"Karbon and Xero Practice Manager (always null there).",
	"Engagement.client": "Null when the proposal names no contact or customer (Xero and Xero Practice Manager quotes, QuickBooks Online estimates).",
	"Engagement.letter_document": "The engagement letter, linked from the firm's document store where the link is unambiguous. " +
		"Null otherwise, on every system: no vendor names an engagement's letter.",
	"Engagement.created_at": "When the proposal was made: QuickBooks Online's creation time, else the quote's date (Xero, Xero Practice Manager). " +
		"Null when the quote has no date.",
	"Job.client": "Null when the work names no client (Karbon, Xero Practice Manager).",
	"Job.owner": "The person responsible for the job. Null when no one is: Karbon, a work item with no assignee; " +
		"Xero Practice Manager, a job with neither manager nor partner.",
	"Job.created_at": "When the work started: Karbon and Xero Practice Manager publish no creation time, so it is the work's start date, " +
		"null when it has none.",
	"Document.client": "Null when the file's folder names no client of the firm (SharePoint, OneDrive, Google Drive, Dropbox).",
	"Invoice.number":  "The ledger's invoice number. Null when it gives none (QuickBooks Online without a DocNumber, Xero, Karbon).",
	"Invoice.client":  "Null when the invoice names no contact or customer (Xero, QuickBooks Online, Karbon, Xero Practice Manager).",
	"Invoice.created_at": "When the invoice was created: QuickBooks Online's creation time, else the invoice's date (Xero, Karbon, " +
		"Xero Practice Manager publish no creation time). Null when it has neither.",
	"Person.email": "Null when the system holds no email address for the person (a Xero Practice Manager staff member without one).",
	"Person.created_at": "When the person was added in the system. Null where the system publishes no creation time: " +
		"Karbon and Xero Practice Manager (always null there).",
}

// dates are string fields holding a calendar date rather than a time.
var dates = map[string]bool{
	"Job.deadline": true, "JobCreate.deadline": true, "JobPatch.deadline": true, "Invoice.issued_on": true, "Invoice.due_on": true,
}

// errorCodes lists every error code by status, as the contract fixes them.
var errorCodes = map[int][]string{
	400: {"parameter_invalid", "parameter_missing", "parameter_unknown", "invalid_cursor", "invalid_json",
		"invalid_state", "consent_denied"}, // the consent callback's
	401: {"unauthenticated", "credential_revoked"}, // credential_revoked: an event stream's last message
	403: {"insufficient_scope"},
	404: {"resource_not_found", "unknown_api_version"},
	405: {"method_not_allowed"},
	409: {"conflict", "system_not_connected", "connection_needs_reconnect", "role_configured", "role_connected", "system_not_registered"},
	413: {"payload_too_large"},
	415: {"unsupported_media_type"},
	422: {"idempotency_key_reused", "invalid_stage"},
	429: {"rate_limited"},
	500: {"internal_error"},
	502: {"upstream_unavailable"},
	503: {"upstream_unavailable", "connection_needs_reconnect"},
}

type schemaSet map[string]any

// schemaNames keep the document's names of types renamed in the code (the
// document is public), and rename a type whose name a generated client
// takes for itself: oapi-codegen names its client Client.
var schemaNames = map[string]string{"SyncStatus": "SyncState", "Client": "ClientRecord"}

// schemaName is the document's name of a named struct.
func schemaName(t reflect.Type) string {
	if name, ok := schemaNames[t.Name()]; ok {
		return name
	}
	return t.Name()
}

// schemaOf describes a Go type, registering named structs as components.
func (s schemaSet) schemaOf(t reflect.Type) map[string]any {
	switch {
	case t == reflect.TypeOf(dispatcher.Event{}):
		// Registered with the event catalog.
		return ref("Event")
	case t == reflect.TypeOf(time.Time{}):
		return map[string]any{"type": "string", "format": "date-time"}
	case t == reflect.TypeOf(json.RawMessage{}):
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Pointer:
		inner := s.schemaOf(t.Elem())
		if ref, ok := inner["$ref"]; ok {
			return map[string]any{"oneOf": []any{map[string]any{"$ref": ref}, map[string]any{"type": "null"}}}
		}
		out := map[string]any{}
		for k, v := range inner {
			out[k] = v
		}
		out["type"] = []any{inner["type"], "null"}
		return out
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Int32:
		return map[string]any{"type": "integer"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": s.schemaOf(t.Elem())}
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			return map[string]any{"type": "object", "additionalProperties": s.schemaOf(t.Elem())}
		}
	case reflect.Struct:
		name := schemaName(t)
		if _, ok := s[name]; !ok {
			s[name] = nil // placeholder against recursion
			s[name] = s.structSchema(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	panic(fmt.Sprintf("openapi: no schema for %s", t))
}

func (s schemaSet) structSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	s.fields(t, t.Name(), props, &required)
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// fields adds t's JSON fields to props, flattening embedded structs as
// encoding/json does; owner names the outer Go type for enums and dates.
func (s schemaSet) fields(t reflect.Type, owner string, props map[string]any, required *[]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			s.fields(f.Type, f.Type.Name(), props, required)
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		schema := s.schemaOf(f.Type)
		key := owner + "." + name
		if e := enum(key); len(e) > 0 {
			schema["enum"] = nullableEnum(schema, e)
		}
		if dates[key] {
			if ty, ok := schema["type"].([]any); ok {
				schema = map[string]any{"type": ty, "format": "date"}
			} else {
				schema["format"] = "date"
			}
		}
		if name == "object" && f.Type.Kind() == reflect.String && enum(key) == nil {
			schema["const"] = strings.ToLower(owner)
		}
		if key == "Tombstone.deleted" {
			schema["const"] = true
		}
		if why, ok := unknowns[key]; ok {
			schema["description"] = why
		}
		if key == "Connection.stage_map" {
			schema["additionalProperties"] = map[string]any{"type": "string", "enum": append([]string{""}, practice.JobStages...)}
			schema["description"] = "The administrator's entries of the records system's stage map: a job state's name (as the vendor names it) " +
				"-> the stage it stands for, or \"\" for a state left unmapped. States it does not name map to the stage their names suggest, if any. " +
				"Edited through the console, `practicegw connect stage-map` or the admin endpoint."
		}
		if name == "version" && owner == "Connection" {
			schema["description"] = "Increases with each change of the connection."
		} else if name == "version" && !isInput(owner) {
			schema["minimum"] = 1
			schema["description"] = "Increases with each change of the record, the same on every instance. " +
				"Drop an event whose data.object.version is not greater than the last you applied for the record."
		}
		props[name] = schema
		// Inputs have every field optional; outputs always carry fields
		// that are not omitted when empty, a nullable one as null.
		optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		if !optional && !isInput(owner) {
			*required = append(*required, name)
		}
	}
}

// isInput reports whether a type is a request body, whose fields are all
// optional unless marked otherwise.
func isInput(name string) bool {
	return strings.HasSuffix(name, "Input") || strings.HasSuffix(name, "Patch") ||
		strings.HasSuffix(name, "Create") || strings.HasSuffix(name, "Request") || name == "ReplayFailed" || name == "StageMove"
}

// openAPIDocument builds the OpenAPI 3.1 document from the route table.
func openAPIDocument(notices map[*route]Deprecation) ([]byte, error) {
	schemas := schemaSet{}
	schemas["Error"] = map[string]any{
		"type": "object", "required": []string{"error"},
		"properties": map[string]any{"error": map[string]any{
			"type": "object", "required": []string{"code", "message", "request_id"},
			"properties": map[string]any{
				"code":       map[string]any{"type": "string", "enum": allCodes()},
				"message":    map[string]any{"type": "string", "description": "One human sentence."},
				"request_id": map[string]any{"type": "string", "pattern": "^req_"},
				"param":      map[string]any{"type": "string", "description": "The parameter at fault, when there is one."},
				"mapped_stages": map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": practice.JobStages},
					"description": "With invalid_stage for a stage the firm's system maps nothing to: the stages it maps, which a job can be moved to."},
			},
		}},
	}
	webhooks, err := schemas.eventCatalog()
	if err != nil {
		return nil, err
	}
	paths := map[string]map[string]any{}
	for i := range routes {
		rt := &routes[i]
		if paths[rt.pattern] == nil {
			paths[rt.pattern] = map[string]any{}
		}
		_, deprecated := notices[rt]
		paths[rt.pattern][strings.ToLower(rt.method)] = operation(rt, schemas, deprecated)
	}
	// Required fields of request bodies.
	markRequired(schemas, "StageMove", "stage")
	markRequired(schemas, "EndpointCreate", "url", "events")
	markRequired(schemas, "ReplayFailed", "since")
	markRequired(schemas, "TriggerRequest", "event")
	markRequired(schemas, "ConnectionCreate", "role", "system")
	markRequired(schemas, "ClientCreate", "name")
	markRequired(schemas, "JobCreate", "title", "client")

	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "practicegw Practice Records API",
			"version": "v1",
			"description": "One REST/JSON API over an accounting practice's clients, engagements, jobs, documents, invoices and people. " +
				"Collections page on an opaque cursor; writes accept Idempotency-Key; every response carries Request-Id and rate-limit headers.",
		},
		"servers":  []any{map[string]any{"url": "/"}},
		"paths":    paths,
		"webhooks": webhooks,
		"components": map[string]any{
			"schemas":    schemas,
			"parameters": webhookParameters(),
			"securitySchemes": map[string]any{"bearer": map[string]any{
				"type": "http", "scheme": "bearer", "bearerFormat": "pgw_live_… or pgw_test_… token",
				"description": "A credential's token. Scopes: " + strings.Join(auth.Scopes, ", ") + ".",
			}},
			"headers": responseHeaders(),
		},
	}
	return json.MarshalIndent(doc, "", "  ")
}

// operation is one route as the document describes it.
func operation(rt *route, schemas schemaSet, deprecated bool) map[string]any {
	op := map[string]any{
		"operationId": rt.op,
		"summary":     rt.summary,
		"responses":   responses(rt, schemas),
	}
	op["tags"] = []string{rt.tagName()}
	if rt.scope != "" {
		op["security"] = []any{map[string]any{"bearer": []string{rt.scope}}}
		op["description"] = strings.TrimSpace("Requires the `" + rt.scope + "` scope. " + rt.note)
	} else {
		op["security"] = []any{}
	}
	var params []any
	for _, p := range rt.parameters() {
		m := map[string]any{"name": p.name, "in": p.in, "required": p.required, "schema": p.schema}
		if p.desc != "" {
			m["description"] = p.desc
		}
		params = append(params, m)
	}
	if rt.body != nil {
		body := schemas.schemaOf(reflect.TypeOf(rt.body))
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{
			"application/json": map[string]any{"schema": body}}}
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if deprecated {
		op["deprecated"] = true
	}
	return op
}

// responseHeaders are the headers the document's answers name.
func responseHeaders() map[string]any {
	return map[string]any{
		"Request-Id":       map[string]any{"schema": map[string]any{"type": "string"}},
		"RateLimit":        map[string]any{"schema": map[string]any{"type": "string"}, "description": `e.g. "default";r=7182;t=1`},
		"RateLimit-Policy": map[string]any{"schema": map[string]any{"type": "string"}, "description": `e.g. "default";q=7200;w=3600`},
		"Retry-After":      map[string]any{"schema": map[string]any{"type": "integer"}, "description": "Seconds to wait."},
		"ETag": map[string]any{"schema": map[string]any{"type": "string"},
			"description": "The answer's entity tag: send it back as If-None-Match to be answered 304 when nothing changed."},
		"Data-Confirmed-At": map[string]any{"schema": map[string]any{"type": "string", "format": "date-time"},
			"description": "On records of a firm's real system: when the gateway's copy was last confirmed against the vendor. Absent while the first copy is still being made, and on sandbox records."},
		"Data-State": map[string]any{"schema": map[string]any{"type": "string", "enum": []string{"backfilling", "live", "lagging", "failing"}},
			"description": "On records of a firm's real system: the state of the gateway's copy. lagging or failing: the answer may be stale (the vendor cannot be reached), Data-Confirmed-At says how stale."},
		"Data-State-Reason": map[string]any{"schema": map[string]any{"type": "string", "maxLength": 200},
			"description": "With Data-State: failing, why, in a few plain words (printable ASCII): e.g. the connection waits for its administrator (\"Karbon refused the access key; reconnect with a new one\") or the vendor fails the gateway's calls. Never the vendor's own words."},
	}
}

// tagName groups the route in the document and the explorer.
func (rt *route) tagName() string {
	switch {
	case rt.tag != "":
		return rt.tag
	case rt.scope == "":
		return "meta"
	}
	return string(rt.kind)
}

// parameter is one path, query or header parameter of a route.
type parameter struct {
	name, in, desc string
	required       bool
	schema         map[string]any
}

// parameters lists the route's parameters: its id, its query, and the
// Idempotency-Key of a write, in that order.
func (rt *route) parameters() []parameter {
	var out []parameter
	if strings.Contains(rt.pattern, "{id}") {
		out = append(out, parameter{name: "id", in: "path", required: true,
			schema: map[string]any{"type": "string", "pattern": "^" + rt.prefix}})
	}
	if strings.Contains(rt.pattern, "{token}") {
		out = append(out, parameter{name: "token", in: "path", required: true,
			desc: "The start link's token, as authorize_url names it: single use.", schema: map[string]any{"type": "string"}})
	}
	for _, p := range rt.query {
		out = append(out, parameter{name: p.name, in: "query", desc: p.desc, schema: paramSchema(p)})
	}
	if rt.stream {
		out = append(out, parameter{name: "Last-Event-ID", in: "header",
			desc:   "The id of the last message received: the stream resumes after it.",
			schema: map[string]any{"type": "string"}})
	}
	if rt.conditional() {
		out = append(out, parameter{name: "If-None-Match", in: "header",
			desc:   "The ETag of an earlier answer: answered 304 with no body, and not counted against the ceiling, when it is still current.",
			schema: map[string]any{"type": "string"}})
	}
	if rt.body != nil {
		out = append(out, parameter{name: "Idempotency-Key", in: "header",
			desc:   "Retries with the same key and body replay the first answer for 24 hours.",
			schema: map[string]any{"type": "string", "maxLength": 255}})
	}
	return out
}

// markRequired marks the fields a request body must carry. A field the
// body's Go type holds as a pointer is nullable in the document, but a
// null is as good as missing (400 parameter_missing): a required one is
// not nullable.
func markRequired(s schemaSet, name string, fields ...string) {
	m, ok := s[name].(map[string]any)
	if !ok {
		return
	}
	m["required"] = fields
	for _, f := range fields {
		p := m["properties"].(map[string]any)[f].(map[string]any)
		if types, ok := p["type"].([]any); ok && len(types) == 2 && types[1] == "null" {
			p["type"] = types[0]
			if e, ok := p["enum"].([]any); ok && len(e) > 0 && e[len(e)-1] == nil {
				p["enum"] = e[:len(e)-1]
			}
		}
	}
}

// nullableEnum is a field's vocabulary as its schema lists it: with null
// when the field is nullable, since an enum without it refuses the null
// its type allows.
func nullableEnum(schema map[string]any, values []string) []any {
	out := make([]any, 0, len(values)+1)
	for _, v := range values {
		out = append(out, v)
	}
	if types, ok := schema["type"].([]any); ok && slices.Contains(types, "null") {
		out = append(out, nil)
	}
	return out
}

func paramSchema(p param) map[string]any {
	switch p.typ {
	case "limit":
		return map[string]any{"type": "integer", "minimum": 1, "maximum": maxLimit, "default": defaultLimit}
	case "cursor":
		return map[string]any{"type": "string", "pattern": "^cur_"}
	case "enum":
		return map[string]any{"type": "string", "enum": p.enum}
	case "id":
		return map[string]any{"type": "string", "pattern": "^" + p.prefix}
	case "date-time":
		return map[string]any{"type": "string", "format": "date-time"}
	case "date":
		return map[string]any{"type": "string", "format": "date"}
	case "boolean":
		return map[string]any{"type": "boolean"}
	}
	return map[string]any{"type": "string"}
}

func responses(rt *route, schemas schemaSet) map[string]any {
	headers := map[string]any{
		"Request-Id":       map[string]any{"$ref": "#/components/headers/Request-Id"},
		"RateLimit":        map[string]any{"$ref": "#/components/headers/RateLimit"},
		"RateLimit-Policy": map[string]any{"$ref": "#/components/headers/RateLimit-Policy"},
	}
	content, description := successContent(rt, schemas)
	out := map[string]any{
		fmt.Sprint(rt.status): map[string]any{"description": description, "headers": headers, "content": content},
	}
	if rt.op == "start_consent" {
		out[fmt.Sprint(rt.status)] = map[string]any{
			"description": "To the vendor's consent page, with the cookie the callback requires.",
			"headers": map[string]any{
				"Request-Id": map[string]any{"$ref": "#/components/headers/Request-Id"},
				"Location": map[string]any{"description": "The vendor's consent page (it carries the consent's state).",
					"schema": map[string]any{"type": "string", "format": "uri"}},
				"Set-Cookie": map[string]any{"description": "practicegw_consent: HttpOnly, SameSite=Lax, Path=/connect, " +
					"Secure when public_url is https, for as long as the consent lasts.", "schema": map[string]any{"type": "string"}},
			},
		}
	}
	if rt.conditional() {
		headers["ETag"] = map[string]any{"$ref": "#/components/headers/ETag"}
		if rt.kind != "" {
			headers["Data-Confirmed-At"] = map[string]any{"$ref": "#/components/headers/Data-Confirmed-At"}
			headers["Data-State"] = map[string]any{"$ref": "#/components/headers/Data-State"}
			headers["Data-State-Reason"] = map[string]any{"$ref": "#/components/headers/Data-State-Reason"}
		}
		out["304"] = map[string]any{
			"description": "Not Modified: If-None-Match holds the current ETag. Not counted against the credential's ceiling.",
			"headers": map[string]any{
				"ETag":             map[string]any{"$ref": "#/components/headers/ETag"},
				"Request-Id":       map[string]any{"$ref": "#/components/headers/Request-Id"},
				"RateLimit":        map[string]any{"$ref": "#/components/headers/RateLimit"},
				"RateLimit-Policy": map[string]any{"$ref": "#/components/headers/RateLimit-Policy"},
			},
		}
	}
	statuses := rt.errorStatuses()
	for _, st := range statuses {
		resp := map[string]any{
			"description": strings.Join(errorCodes[st], ", "),
			"content": map[string]any{"application/json": map[string]any{
				"schema": map[string]any{"$ref": "#/components/schemas/Error"}}},
		}
		if st == http.StatusTooManyRequests {
			resp["headers"] = map[string]any{"Retry-After": map[string]any{"$ref": "#/components/headers/Retry-After"}}
		}
		out[fmt.Sprint(st)] = resp
	}
	return out
}

// successContent is what rt answers on success, by media type, and the
// answer's description.
func successContent(rt *route, schemas schemaSet) (content map[string]any, description string) {
	var success map[string]any
	switch {
	case rt.op == "get_openapi":
		success = map[string]any{"type": "object"}
	case rt.serve == nil, rt.stream:
	case rt.responseType() == nil:
		// A vendor's webhook: its handler answers the vendor.
		success = map[string]any{}
	case rt.op == "list_connections":
		// Unpaged (a firm has a few), but in the list envelope.
		success = schemas.schemaOf(reflect.TypeOf(ConnectionList{}))
	case strings.HasPrefix(rt.op, "list_"):
		success = schemas.listOf(rt)
	default:
		success = schemas.schemaOf(reflect.TypeOf(rt.responseType()))
	}
	content = map[string]any{"application/json": map[string]any{"schema": success}}
	description = "Success"
	if rt.stream {
		content = map[string]any{"text/event-stream": map[string]any{"schema": map[string]any{"type": "string"}}}
		description = "Success: a stream of messages, each an event envelope (see webhooks) as its data and a position as its id, and comments."
	}
	if rt.op == "connect_callback" {
		content["text/html"] = map[string]any{"schema": map[string]any{"type": "string"}}
		description = "Success: to a browser (Accept: text/html) a page that says the system is connected, or that the organisation " +
			"must be chosen, linking to the console's Systems page; to any other client the connection."
	}
	if rt.op == "list_webhook_deliveries" {
		// A media type has no description of its own: the response says
		// what each one holds.
		content["application/x-ndjson"] = map[string]any{"schema": map[string]any{"type": "string"}}
		content["text/csv"] = map[string]any{"schema": map[string]any{"type": "string"}}
		description = "Success: a page of deliveries as JSON, or with Accept: application/x-ndjson every delivery in the range " +
			"with its attempts, one JSON object a line, or with Accept: text/csv every attempt in the range, one row each."
	}
	return content, description
}

// listOf registers the page a collection route answers as a component,
// <Item>List, and returns its reference. A page of records may hold
// tombstones (include_deleted=true), so its items are <Item>OrTombstone:
// any of the record and its tombstone, which a generated client decodes
// as either (oapi-codegen's AsJob and AsTombstone, a TypeScript union).
func (s schemaSet) listOf(rt *route) map[string]any {
	item := s.schemaOf(reflect.TypeOf(rt.responseType()))
	name := strings.TrimPrefix(item["$ref"].(string), "#/components/schemas/")
	if rt.kind != "" {
		// ClientRecord's page is ClientList, as its route names it.
		name = componentName(rt.kind.Singular())
	}
	if findParam(rt.query, includeDeleted) != nil {
		union := name + "OrTombstone"
		s[union] = map[string]any{
			"description": "A record; with include_deleted=true, also the tombstone of a removed record, whose `deleted` is true.",
			"anyOf":       []any{item, s.schemaOf(reflect.TypeOf(practice.Tombstone{}))},
		}
		item = ref(union)
	}
	list := name + "List"
	s[list] = map[string]any{
		"type": "object", "required": []string{"object", "data", "has_more", "next_cursor"}, "additionalProperties": false,
		"properties": map[string]any{
			"object":      map[string]any{"type": "string", "const": "list"},
			"data":        map[string]any{"type": "array", "items": item},
			"has_more":    map[string]any{"type": "boolean"},
			"next_cursor": map[string]any{"type": []string{"string", "null"}, "pattern": "^cur_"},
		},
	}
	return ref(list)
}

// conditional reports whether the route is a read answered with an ETag
// and 304 for a matching If-None-Match (writeRead).
func (rt *route) conditional() bool {
	return rt.method == http.MethodGet && rt.scope != "" && !rt.stream
}

// errorStatuses are the error statuses the route can answer, sorted.
func (rt *route) errorStatuses() []int {
	statuses := []int{400, 404, 405, 429, 500}
	if rt.scope != "" {
		statuses = append(statuses, 401, 403, 503)
	}
	if rt.body != nil {
		statuses = append(statuses, 409, 413, 415, 422)
	} else if rt.tag == "webhooks" && rt.method != http.MethodGet {
		// A delivery being attempted, an endpoint disabled, a replay held
		// back by its endpoint's breaker or a bound on requests in flight.
		statuses = append(statuses, 409)
	}
	if rt.kind != "" {
		// No system serves the firm's role (system_not_connected), or its
		// connection waits for its administrator to reconnect it
		// (connection_needs_reconnect, writes); the firm's system answered
		// with something unreadable.
		statuses = append(statuses, 409, 502)
		statuses = slices.Compact(slices.Sorted(slices.Values(statuses)))
	}
	if rt.tag == "connections" {
		// A connection changed meanwhile or its role is set in the
		// Caddyfile; a vendor that answered what the gateway cannot use,
		// or that cannot be reached.
		statuses = append(statuses, 409, 502, 503)
		statuses = slices.Compact(slices.Sorted(slices.Values(statuses)))
	}
	sort.Ints(statuses)
	return statuses
}

// responseType is the Go type of the route's success body (or of its
// items, for a collection).
func (rt *route) responseType() any {
	if rt.schema != nil {
		return rt.schema
	}
	return resourceTypes[rt.kind]
}

func allCodes() []string {
	var codes []string
	for _, c := range errorCodes {
		codes = append(codes, c...)
	}
	sort.Strings(codes)
	return slices.Compact(codes)
}
