package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/store/connection"
)

// The connection routes of the admin endpoint, for `practicegw connect`:
// an operator connects a firm's system from a terminal, as its
// administrator does from the console or /v1/connections.
//
//	GET    /practicegw/connections/{firm}        {"data":[connection, ...]}
//	POST   /practicegw/connections/{firm}        {"role","system","access_key"?} -> 201 connection
//	GET    /practicegw/connections/{firm}/{id}   connection
//	PATCH  /practicegw/connections/{firm}/{id}   {"tenant_id"} or {"reconnect":true,"access_key"?}
//	DELETE /practicegw/connections/{firm}/{id}   connection, disconnected
//	GET    /practicegw/connections/{firm}/{id}/stage_map   a records connection's stage map
//	PATCH  /practicegw/connections/{firm}/{id}/stage_map   {"stage_map":{state: stage | "" | null}} -> the map

// connectionService is what the routes need of the connection service:
// what /v1/connections reads and changes it through.
type connectionService interface {
	api.ConnectionReader
	api.ConnectionWriter
}

// stageMaps is what the stage map routes need of the connection service.
type stageMaps interface {
	StageMap(ctx context.Context, firm, id string) (connection.StageMapView, error)
	EditStageMap(ctx context.Context, firm, id string, edit map[string]*string) (connection.StageMapView, error)
}

// connectionAdminRoutes serves the routes over the service that service
// finds when a request comes (nil: the gateway offers no connections);
// known says whether the gateway serves a firm.
func connectionAdminRoutes(service func() connectionService, known func(firm string) bool) []caddy.AdminRoute {
	h := connectionAdminHandler{service: service, known: known}
	return []caddy.AdminRoute{{Pattern: "/practicegw/connections/", Handler: caddy.AdminHandlerFunc(h.serve)}}
}

type connectionAdminHandler struct {
	service func() connectionService
	known   func(firm string) bool
}

func (h connectionAdminHandler) serve(w http.ResponseWriter, r *http.Request) error {
	firm, id, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/practicegw/connections/"), "/")
	id, sub, _ := strings.Cut(id, "/")
	if firm == "" || sub != "" && (id == "" || sub != "stage_map") {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no route %s %s", r.Method, r.URL.Path)}
	}
	if !h.known(firm) {
		return unknownFirm(w)
	}
	svc := h.service()
	if svc == nil {
		return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable,
			Err: errors.New("this gateway offers no connections: its configuration has no connect block")}
	}
	ctx := r.Context()
	var (
		v      connection.View
		err    error
		status = http.StatusOK
	)
	if sub != "" {
		return h.stageMap(w, r, svc, firm, id)
	}
	switch {
	case id == "" && r.Method == http.MethodGet:
		views, err := svc.List(ctx, firm)
		if err != nil {
			return connectionRefusal(w, err)
		}
		if views == nil {
			views = []connection.View{}
		}
		return writeJSON(w, http.StatusOK, map[string]any{"data": views})
	case id == "" && r.Method == http.MethodPost:
		var req connection.Request
		if req, err = decodeConnectionRequest(w, r); err == nil && (req.OrganisationID != "" || req.Reconnect) {
			err = badRequest(errors.New("a new connection takes role, system and access_key; tenant_id and reconnect change one"))
		}
		if err == nil {
			v, err = svc.Connect(ctx, firm, req)
		}
		status = http.StatusCreated
	case id != "" && r.Method == http.MethodGet:
		v, err = svc.Get(ctx, firm, id)
	case id != "" && r.Method == http.MethodPatch:
		var req connection.Request
		if req, err = decodeConnectionRequest(w, r); err == nil && (req.Role != "" || req.System != "") {
			err = badRequest(errors.New("a connection's role and system do not change: disconnect it and connect another"))
		}
		if err == nil {
			v, err = svc.Update(ctx, firm, id, req)
		}
	case id != "" && r.Method == http.MethodDelete:
		v, err = svc.Disconnect(ctx, firm, id)
	default:
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	if err != nil {
		return connectionRefusal(w, err)
	}
	return writeJSON(w, status, v)
}

func decodeConnectionRequest(w http.ResponseWriter, r *http.Request) (connection.Request, error) {
	var req connection.Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, badRequest(fmt.Errorf("reading connection request: %w", err))
	}
	return req, nil
}

// connectionRefusal answers the service's refusals with their status,
// the contract's sentence, code and parameter; anything else is the
// admin endpoint's 500.
func connectionRefusal(w http.ResponseWriter, err error) error {
	var apiErr caddy.APIError
	switch {
	case errors.As(err, &apiErr):
		return err
	case errors.Is(err, connection.ErrNotFound):
		return refuse(w, http.StatusNotFound, "resource_not_found", "connection", "No such connection.")
	case errors.Is(err, connection.ErrVersion):
		return refuse(w, http.StatusConflict, "conflict", "", "The connection changed meanwhile; try again.")
	}
	if e, ok := apierror.From(err); ok && e.Status < http.StatusInternalServerError {
		param := e.Param
		if e.Status == http.StatusNotFound && param == "" {
			param = "connection" // the firm is known: the route's {id} is not
		}
		return refuse(w, e.Status, e.Code, param, e.Message)
	}
	return err
}

// stageMap serves a connection's stage map: shown, or edited by a merge
// patch of its entries.
func (h connectionAdminHandler) stageMap(w http.ResponseWriter, r *http.Request, svc connectionService, firm, id string) error {
	sm, ok := svc.(stageMaps)
	if !ok {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: errors.New("this gateway's connections have no stage maps")}
	}
	var (
		v   connection.StageMapView
		err error
	)
	switch r.Method {
	case http.MethodGet:
		v, err = sm.StageMap(r.Context(), firm, id)
	case http.MethodPatch:
		var body struct {
			StageMap map[string]*string `json:"stage_map"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err = dec.Decode(&body); err != nil {
			err = badRequest(fmt.Errorf("reading stage map edit: %w", err))
		} else {
			v, err = sm.EditStageMap(r.Context(), firm, id, body.StageMap)
		}
	default:
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	if err != nil {
		return connectionRefusal(w, err)
	}
	return writeJSON(w, http.StatusOK, v)
}
