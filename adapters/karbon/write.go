package karbon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// Writes go to Karbon and come back as Karbon then has the record: every
// write ends with a fresh read, so the answer is what the next GET shows.
// Karbon's PUT replaces a record whole, so updates that need one (status,
// owner, cards, a work item's status or client) send back the record as
// read, restricted to the fields Karbon's write schema names, with the
// change applied.

// send makes a write and decodes the answer into out (nil: ignore it). A
// Karbon 400 becomes a parameter_invalid naming the field Karbon named.
func (a *Adapter) send(ctx context.Context, method, path string, body any, out any, what string) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("karbon: encode %s: %w", what, err)
	}
	_, err = a.c.JSON(ctx, upstream.Request{Method: method, Path: path, Body: b}, what, out)
	if err == nil {
		return nil
	}
	var s *practice.StatusError
	if errors.As(err, &s) && (s.Status == http.StatusBadRequest || s.Status == http.StatusUnprocessableEntity) {
		return karbonInvalid(s.Body, what)
	}
	return fmt.Errorf("karbon: write %s: %w", what, err)
}

// karbonInvalid reads Karbon's error body ({"error":{"code","message",
// "details"}}, details an object or a list) into a parameter_invalid.
func karbonInvalid(body []byte, what string) error {
	var e struct {
		Error struct {
			Message string
			Details json.RawMessage
		} `json:"error"`
	}
	json.Unmarshal(body, &e)
	type detail struct{ Target, Message string }
	var ds []detail
	var d detail
	if json.Unmarshal(e.Error.Details, &d) == nil && d.Target != "" {
		ds = append(ds, d)
	} else {
		json.Unmarshal(e.Error.Details, &ds)
	}
	param, msg := what, e.Error.Message
	if len(ds) > 0 {
		param, msg = paramOf(ds[0].Target, what), ds[0].Message
	}
	if msg == "" {
		msg = "Karbon refused the " + what + "."
	}
	return &practice.InvalidError{Code: "parameter_invalid", Param: param, Message: "Karbon refused the " + what + ": " + msg}
}

// paramOf names our field for a Karbon property ("workItem.ClientKey").
func paramOf(target, fallback string) string {
	prop := target[strings.LastIndexByte(target, '.')+1:]
	switch prop {
	case "ClientKey", "ClientType":
		return "client"
	case "AssigneeEmailAddress", "ClientOwner":
		return "owner"
	case "Title":
		return "title"
	case "WorkType":
		return "type"
	case "DeadlineDate":
		return "deadline"
	case "FirstName", "LastName", "FullName":
		return "name"
	case "ContactType":
		return "status"
	}
	return fallback
}

// recordWrite publishes the change a write made, when Deps.Changes is
// set. The write has happened, so a failure here is logged: the vendor's
// webhook reports the same change.
func (a *Adapter) recordWrite(ctx context.Context, k practice.Kind, id string, before, after json.RawMessage, note string) {
	if a.changes == nil {
		return
	}
	o := changes.Observation{Tenant: a.tenant(), Kind: k, ResourceID: id, Before: before, After: after, Created: before == nil, Note: note}
	if _, err := a.rec.Observe(ctx, a.changes, o); err != nil {
		a.log.Warn("change of a write not recorded", zap.String("id", id), zap.Error(err))
	}
}

func pick(m map[string]any, keys []string) map[string]any {
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		if v, ok := m[k]; ok && v != nil {
			out[k] = v
		}
	}
	return out
}

func set(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}
