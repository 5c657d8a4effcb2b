package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/idempotency"
)

// Every error that can reach a route answers with a status its operation
// declares in the OpenAPI document, so a generated client knows every
// answer it may get: the domain errors are mapped through the one error
// table, for the routes they can come from.
func TestEveryErrorStatusIsDeclared(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string                     `json:"operationId"`
			Responses   map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(servedDocument(t), &doc); err != nil {
		t.Fatal(err)
	}
	system := func(rt *route) bool { return rt.kind != "" }
	writes := func(rt *route) bool { return rt.body != nil }
	lists := func(rt *route) bool { return strings.HasPrefix(rt.op, "list_") }
	webhookWrites := func(rt *route) bool { return rt.tag == "webhooks" && rt.method != http.MethodGet }
	reads := func(rt *route) bool { return rt.conditional() }
	cases := []struct {
		err   error
		from  func(*route) bool
		extra int // a status answered without an error value
	}{
		{err: practice.ErrNotFound, from: system},
		{err: practice.ErrUnavailable, from: system},
		{err: upstream.Malformed("Karbon", "work items", fmt.Errorf("not JSON")), from: system},
		{err: &paging.CycleError{Token: "p1"}, from: system},
		{err: &practice.StatusError{Status: http.StatusUnauthorized}, from: system},
		{err: &practice.InvalidError{Code: "invalid_stage"}, from: writes},
		{err: &practice.InvalidError{Code: "invalid_cursor"}, from: lists},
		{err: practice.ErrConflict, from: writes},
		{err: idempotency.ErrKeyReused, from: writes},
		{err: idempotency.ErrInProgress, from: writes},
		{err: practice.ErrInvalidCursor, from: lists},
		{err: practice.ErrTooManyEndpoints, from: webhookWrites},
		{err: practice.ErrEndpointDisabled, from: webhookWrites},
		{err: practice.ErrBusy, from: webhookWrites},
		{from: reads, extra: http.StatusNotModified},
	}
	for i := range routes {
		rt := &routes[i]
		op, ok := doc.Paths[rt.pattern][strings.ToLower(rt.method)]
		if !ok {
			t.Fatalf("%s %s is not in the document", rt.method, rt.pattern)
		}
		for _, c := range cases {
			if !c.from(rt) {
				continue
			}
			status := c.extra
			if c.err != nil {
				e, ok := apierror.From(c.err)
				if !ok {
					t.Fatalf("%v is not in the error table", c.err)
				}
				status = e.Status
			}
			if _, ok := op.Responses[fmt.Sprint(status)]; !ok {
				t.Errorf("%s (%s %s) can answer %d (%v) but does not declare it", op.OperationID, rt.method, rt.pattern, status, c.err)
			}
		}
	}
}
