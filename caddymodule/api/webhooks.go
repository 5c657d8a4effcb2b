package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// Event and webhook routes. They read and write the webhook engine's
// state for the credential's firm and mode (live or sandbox).

var (
	eventFilters = []param{
		{name: "limit", typ: "limit", desc: "Items per page, 1 to 200. Default 50."},
		{name: "cursor", typ: "cursor", desc: "The next_cursor of the previous page."},
		{name: "event", typ: "enum", enum: dispatcher.Kinds(), desc: "Only events of this kind."},
		{name: "occurred_after", typ: "date-time", desc: "Only events that occurred at or after this time."},
		{name: "occurred_before", typ: "date-time", desc: "Only events that occurred before this time."},
	}
	deliveryFilters = []param{
		{name: "limit", typ: "limit", desc: "Items per page, 1 to 200. Default 50."},
		{name: "cursor", typ: "cursor", desc: "The next_cursor of the previous page."},
		{name: "state", typ: "enum", enum: []string{"pending", "retrying", "delivered", "failed"}, desc: "Only deliveries in this state."},
		{name: "created_after", typ: "date-time", desc: "Only deliveries created at or after this time."},
		{name: "created_before", typ: "date-time", desc: "Only deliveries created before this time."},
	}
)

// EndpointCreate registers a webhook endpoint.
type EndpointCreate struct {
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	Description string   `json:"description,omitempty"`
}

// EndpointPatch edits a webhook endpoint; absent fields stay as they are.
type EndpointPatch struct {
	URL         *string   `json:"url"`
	Events      *[]string `json:"events"`
	Description *string   `json:"description"`
	Status      *string   `json:"status"`
}

// ReplayFailed bulk-replays an endpoint's failed deliveries.
type ReplayFailed struct {
	Since time.Time `json:"since"`
}

// EndpointWithSecret is an endpoint as creation and rotation answer it:
// the only times its secret is shown.
type EndpointWithSecret struct {
	dispatcher.Endpoint
	Secret string `json:"secret"`
}

// Deleted answers a deletion.
type Deleted struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

// ReplayStarted answers a bulk replay.
type ReplayStarted struct {
	EndpointID string `json:"endpoint_id"`
	Replaying  int    `json:"replaying"`
}

// TriggerRequest asks for one sandbox event of a kind.
type TriggerRequest struct {
	Event string `json:"event"`
}

var eventRoutes = []route{
	{method: http.MethodGet, pattern: "/v1/events", scope: "events:read", op: "list_events", tag: "events",
		summary: "List events, oldest first", query: eventFilters, schema: dispatcher.Event{}, status: http.StatusOK,
		serve: (*Handler).listEvents},
	// Before /v1/events/{id}, which its path would match too.
	{method: http.MethodGet, pattern: "/v1/events/stream", scope: "events:read", op: "stream_events", tag: "events",
		summary: "Stream new events as they are recorded (Server-Sent Events); nothing is registered", query: streamParams,
		status: http.StatusOK, serve: (*Handler).streamEvents, note: streamNote, stream: true},
	{method: http.MethodGet, pattern: "/v1/events/{id}", scope: "events:read", op: "get_event", tag: "events",
		summary: "Retrieve an event", prefix: "evt_", schema: dispatcher.Event{}, status: http.StatusOK,
		serve: (*Handler).getEvent},

	{method: http.MethodGet, pattern: "/v1/webhook_endpoints", scope: "webhooks:read", op: "list_webhook_endpoints",
		tag: "webhooks", summary: "List webhook endpoints", query: pageParams[:2], schema: dispatcher.Endpoint{},
		status: http.StatusOK, serve: (*Handler).listEndpoints},
	{method: http.MethodPost, pattern: "/v1/webhook_endpoints", scope: "webhooks:write", op: "create_webhook_endpoint",
		tag: "webhooks", summary: "Register a webhook endpoint; the answer shows its signing secret once",
		body: EndpointCreate{}, schema: EndpointWithSecret{}, status: http.StatusCreated, serve: (*Handler).createEndpoint},
	{method: http.MethodGet, pattern: "/v1/webhook_endpoints/{id}", scope: "webhooks:read", op: "get_webhook_endpoint",
		tag: "webhooks", summary: "Retrieve a webhook endpoint", prefix: "we_", schema: dispatcher.Endpoint{},
		status: http.StatusOK, serve: (*Handler).getEndpoint},
	{method: http.MethodPatch, pattern: "/v1/webhook_endpoints/{id}", scope: "webhooks:write", op: "update_webhook_endpoint",
		tag: "webhooks", summary: "Update a webhook endpoint's URL, events, description or status", prefix: "we_",
		body: EndpointPatch{}, schema: dispatcher.Endpoint{}, status: http.StatusOK, serve: (*Handler).updateEndpoint},
	{method: http.MethodDelete, pattern: "/v1/webhook_endpoints/{id}", scope: "webhooks:write", op: "delete_webhook_endpoint",
		tag: "webhooks", summary: "Delete a webhook endpoint and its delivery log", prefix: "we_", schema: Deleted{},
		status: http.StatusOK, serve: (*Handler).deleteEndpoint},
	{method: http.MethodPost, pattern: "/v1/webhook_endpoints/{id}/rotate_secret", scope: "webhooks:write",
		op: "rotate_webhook_secret", tag: "webhooks", prefix: "we_", schema: EndpointWithSecret{}, status: http.StatusOK,
		summary: "Rotate the signing secret; the old one also signs for 24 hours", serve: (*Handler).rotateSecret},
	{method: http.MethodGet, pattern: "/v1/webhook_endpoints/{id}/deliveries", scope: "webhooks:read",
		op: "list_webhook_deliveries", tag: "webhooks", prefix: "we_", query: deliveryFilters, schema: dispatcher.Delivery{},
		summary: "List an endpoint's deliveries; Accept: application/x-ndjson or text/csv exports them all",
		status:  http.StatusOK, serve: (*Handler).listDeliveries},
	{method: http.MethodPost, pattern: "/v1/webhook_endpoints/{id}/replay_failed", scope: "webhooks:write",
		op: "replay_failed_deliveries", tag: "webhooks", prefix: "we_", body: ReplayFailed{}, schema: ReplayStarted{},
		summary: "Replay every failed delivery of the endpoint since a time", status: http.StatusAccepted,
		serve: (*Handler).replayFailed},
	{method: http.MethodGet, pattern: "/v1/deliveries/{id}", scope: "webhooks:read", op: "get_delivery", tag: "webhooks",
		summary: "Retrieve a delivery with its attempts", prefix: "dlv_", schema: dispatcher.Delivery{},
		status: http.StatusOK, serve: (*Handler).getDelivery},
	{method: http.MethodPost, pattern: "/v1/deliveries/{id}/replay", scope: "webhooks:write", op: "replay_delivery",
		tag: "webhooks", summary: "Make one immediate attempt outside the schedule", prefix: "dlv_",
		schema: dispatcher.Delivery{}, status: http.StatusOK, serve: (*Handler).replayDelivery},
	{method: http.MethodPost, pattern: "/v1/sandbox/trigger", scope: "webhooks:write", op: "trigger_sandbox_event",
		tag: "webhooks", summary: "Make a realistic change in the firm's sandbox records that raises one event of a kind",
		body: TriggerRequest{}, schema: adminapi.Triggered{}, status: http.StatusCreated, serve: (*Handler).trigger},
}

func (h *Handler) listEvents(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := h.query(c, r.URL.RawQuery)
	if err != nil {
		return err
	}
	eq := dispatcher.EventQuery{Tenant: c.tenant, Cursor: q.Cursor, Limit: q.Limit,
		From: q.time("occurred_after"), To: q.time("occurred_before")}
	if k := q.params["event"]; k != "" {
		eq.Kinds = []string{k}
	}
	page, err := h.events.ListEvents(r.Context(), eq)
	if err != nil {
		return err
	}
	return writePage(w, r, h, c, q, page.Events, page.HasMore, page.Next)
}

func (h *Handler) getEvent(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noQuery(r.URL.RawQuery); err != nil {
		return err
	}
	ev, err := h.events.GetEvent(r.Context(), c.tenant, c.id)
	if err != nil {
		return h.notFoundFor(c, err)
	}
	return readJSON(w, r, ev)
}

func (h *Handler) listEndpoints(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := h.query(c, r.URL.RawQuery)
	if err != nil {
		return err
	}
	all, err := h.endpoints.ListEndpoints(r.Context(), c.tenant)
	if err != nil {
		return err
	}
	// Endpoints are few per firm, so the page is cut here, keyset on id.
	start := 0
	for start < len(all) && q.Cursor != "" && all[start].ID <= q.Cursor {
		start++
	}
	end := min(start+q.Limit, len(all))
	next := ""
	if end < len(all) {
		next = all[end-1].ID
	}
	return writePage(w, r, h, c, q, all[start:end], end < len(all), next)
}

func (h *Handler) createEndpoint(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.writeJSONWith(w, r, c, func(ctx context.Context, body []byte) (any, error) {
		var in EndpointCreate
		if err := decodeBody(body, &in); err != nil {
			return nil, err
		}
		if in.URL == "" {
			return nil, practice.Missing("url")
		}
		if len(in.Events) == 0 {
			return nil, practice.Missing("events")
		}
		ep, secret, err := h.endpointsW.CreateEndpoint(ctx, c.tenant,
			dispatcher.EndpointInput{URL: in.URL, Events: in.Events, Description: in.Description})
		if err != nil {
			return nil, err
		}
		return EndpointWithSecret{Endpoint: ep, Secret: secret}, nil
	})
}

func (h *Handler) getEndpoint(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noQuery(r.URL.RawQuery); err != nil {
		return err
	}
	ep, err := h.endpoints.GetEndpoint(r.Context(), c.tenant, c.id)
	if err != nil {
		return h.notFoundFor(c, err)
	}
	return readJSON(w, r, ep)
}

func (h *Handler) updateEndpoint(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.writeJSONWith(w, r, c, func(ctx context.Context, body []byte) (any, error) {
		var in EndpointPatch
		if err := decodeBody(body, &in); err != nil {
			return nil, err
		}
		return h.endpointsW.UpdateEndpoint(ctx, c.tenant, c.id, dispatcher.EndpointUpdate{
			URL: in.URL, Events: in.Events, Description: in.Description, Status: in.Status})
	})
}

func (h *Handler) deleteEndpoint(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noQuery(r.URL.RawQuery); err != nil {
		return err
	}
	if err := h.endpointsW.DeleteEndpoint(r.Context(), c.tenant, c.id); err != nil {
		return h.notFoundFor(c, err)
	}
	return writeJSON(w, http.StatusOK, Deleted{ID: c.id, Deleted: true})
}

func (h *Handler) rotateSecret(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noQuery(r.URL.RawQuery); err != nil {
		return err
	}
	ep, secret, err := h.secrets.RotateSecret(r.Context(), c.tenant, c.id)
	if err != nil {
		return h.notFoundFor(c, err)
	}
	return writeJSON(w, http.StatusOK, EndpointWithSecret{Endpoint: ep, Secret: secret})
}

func (h *Handler) listDeliveries(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := h.query(c, r.URL.RawQuery)
	if err != nil {
		return err
	}
	if _, err := h.endpoints.GetEndpoint(r.Context(), c.tenant, c.id); err != nil {
		return h.notFoundFor(c, err)
	}
	var states []dispatcher.State
	if s := q.params["state"]; s != "" {
		states = []dispatcher.State{dispatcher.State(s)}
	}
	from, to := q.time("created_after"), q.time("created_before")
	switch export := exportFormat(r.Header.Get("Accept")); export {
	case "application/x-ndjson", "text/csv":
		if q.params["cursor"] != "" || q.params["limit"] != "" {
			return invalidParam("limit", "An export streams every delivery in the range; send no limit or cursor.")
		}
		eq := dispatcher.ExportQuery{EndpointID: c.id, States: states, From: from, To: to}
		w.Header().Set("Content-Type", export)
		w.Header().Set("Content-Disposition", `attachment; filename="`+c.id+`-deliveries`+map[string]string{
			"application/x-ndjson": ".ndjson", "text/csv": ".csv"}[export]+`"`)
		if export == "text/csv" {
			return h.stream(w, func() error { return h.exports.ExportCSV(r.Context(), c.tenant, eq, w) })
		}
		return h.stream(w, func() error { return h.exports.ExportNDJSON(r.Context(), c.tenant, eq, w) })
	}
	page, err := h.deliveries.ListDeliveries(r.Context(), c.tenant, dispatcher.DeliveryQuery{
		EndpointID: c.id, States: states, From: from, To: to, Cursor: q.Cursor, Limit: q.Limit})
	if err != nil {
		return err
	}
	return writePage(w, r, h, c, q, page.Deliveries, page.HasMore, page.Next)
}

// stream runs an export. Once the first bytes are out an error can only
// cut the stream short; it is logged rather than written into the file.
func (h *Handler) stream(w http.ResponseWriter, export func() error) error {
	w.WriteHeader(http.StatusOK)
	if err := export(); err != nil {
		h.logger.Warn("delivery export ended early")
	}
	return nil
}

// exportFormat picks the export media type the Accept header asks for.
func exportFormat(accept string) string {
	for _, part := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		switch mt {
		case "application/x-ndjson", "text/csv":
			return mt
		}
	}
	return ""
}

func (h *Handler) replayFailed(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.writeJSONWith(w, r, c, func(ctx context.Context, body []byte) (any, error) {
		var in ReplayFailed
		if err := decodeBody(body, &in); err != nil {
			return nil, err
		}
		if in.Since.IsZero() {
			return nil, practice.Missing("since")
		}
		n, err := h.replays.ReplayFailed(ctx, c.tenant, c.id, in.Since)
		if err != nil {
			return nil, err
		}
		return ReplayStarted{EndpointID: c.id, Replaying: n}, nil
	})
}

func (h *Handler) getDelivery(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noQuery(r.URL.RawQuery); err != nil {
		return err
	}
	d, err := h.deliveries.GetDelivery(r.Context(), c.tenant, c.id)
	if err != nil {
		return h.notFoundFor(c, err)
	}
	return readJSON(w, r, d)
}

func (h *Handler) replayDelivery(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noQuery(r.URL.RawQuery); err != nil {
		return err
	}
	d, err := h.replays.Replay(r.Context(), c.tenant, c.id)
	if err != nil {
		return h.notFoundFor(c, err)
	}
	return writeJSON(w, http.StatusOK, d)
}

func (h *Handler) trigger(w http.ResponseWriter, r *http.Request, c *call) error {
	if !c.tenant.Sandbox {
		// A trigger changes records: only ever the sandbox's, and only for
		// a credential that is itself limited to the sandbox.
		return apierror.New(http.StatusForbidden, "insufficient_scope",
			"Triggers change sandbox records only; send a sandbox credential (pgw_test_...).")
	}
	return h.writeJSONWith(w, r, c, func(ctx context.Context, body []byte) (any, error) {
		var in TriggerRequest
		if err := decodeBody(body, &in); err != nil {
			return nil, err
		}
		if in.Event == "" {
			return nil, practice.Missing("event")
		}
		return h.sandbox.Trigger(ctx, c.tenant.Firm, in.Event)
	})
}

// notFoundFor names the record in a not-found answer.
func (h *Handler) notFoundFor(c *call, err error) error {
	if errors.Is(err, practice.ErrNotFound) {
		return apierror.New(http.StatusNotFound, "resource_not_found",
			"No such "+c.route.noun()+": \""+c.id+"\".").WithParam("id")
	}
	return err
}

// writeJSONWith runs a write whose answer is a Go value rather than a
// record's stored JSON, with the same body checks and idempotency.
func (h *Handler) writeJSONWith(w http.ResponseWriter, r *http.Request, c *call,
	apply func(ctx context.Context, body []byte) (any, error)) error {
	return h.write(w, r, c, func(ctx context.Context, body []byte) (json.RawMessage, error) {
		v, err := apply(ctx, body)
		if err != nil {
			return nil, h.notFoundFor(c, err)
		}
		return marshal(v)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	writeBody(w, status, append(b, '\n'))
	return nil
}

// answerOptions encode an answer as encoding/json would, but without HTML
// escaping (the envelope is signed that way) and with every time to the
// millisecond, the precision records and events carry, so that no answer
// prints nanoseconds beside another's milliseconds.
var answerOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsontext.EscapeForHTML(false),
	jsonv2.WithMarshalers(jsonv2.MarshalToFunc(func(enc *jsontext.Encoder, t time.Time) error {
		return enc.WriteToken(jsontext.String(t.Truncate(time.Millisecond).Format(time.RFC3339Nano)))
	})))

func marshal(v any) (json.RawMessage, error) {
	return jsonv2.Marshal(v, answerOptions)
}

// writePage answers a collection of Go values in the list envelope.
func writePage[T any](w http.ResponseWriter, r *http.Request, h *Handler, c *call, q parsedQuery, items []T, hasMore bool, next string) error {
	out := struct {
		Object     string  `json:"object"`
		Data       []T     `json:"data"`
		HasMore    bool    `json:"has_more"`
		NextCursor *string `json:"next_cursor"`
	}{Object: "list", Data: items, HasMore: hasMore}
	if out.Data == nil {
		out.Data = []T{}
	}
	if hasMore {
		cur := h.nextCursor(c, q, next)
		out.NextCursor = &cur
	}
	return readJSON(w, r, out)
}
