package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/idempotency"
)

func (h *Handler) createClient(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.write(w, r, c, func(ctx context.Context, body []byte) (json.RawMessage, error) {
		var in practice.ClientInput
		if err := decodeBody(body, &in); err != nil {
			return nil, err
		}
		if err := in.Validate(true); err != nil {
			return nil, err
		}
		return c.backends.Clients().CreateClient(ctx, c.tenant, in)
	})
}

func (h *Handler) updateClient(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.write(w, r, c, func(ctx context.Context, body []byte) (json.RawMessage, error) {
		var in practice.ClientInput
		if err := decodeBody(body, &in); err != nil {
			return nil, err
		}
		if err := in.Validate(false); err != nil {
			return nil, err
		}
		return c.backends.Clients().UpdateClient(ctx, c.tenant, c.id, in)
	})
}

func (h *Handler) createJob(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.write(w, r, c, func(ctx context.Context, body []byte) (json.RawMessage, error) {
		var in practice.JobInput
		if err := decodeBody(body, &in); err != nil {
			return nil, err
		}
		if err := in.Validate(true); err != nil {
			return nil, err
		}
		return c.backends.Jobs().CreateJob(ctx, c.tenant, in)
	})
}

func (h *Handler) updateJob(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.write(w, r, c, func(ctx context.Context, body []byte) (json.RawMessage, error) {
		var in practice.JobInput
		if err := decodeBody(body, &in); err != nil {
			return nil, err
		}
		if err := in.Validate(false); err != nil {
			return nil, err
		}
		return c.backends.Jobs().UpdateJob(ctx, c.tenant, c.id, in)
	})
}

func (h *Handler) moveJob(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.write(w, r, c, func(ctx context.Context, body []byte) (json.RawMessage, error) {
		var in practice.StageMove
		if err := decodeBody(body, &in); err != nil {
			return nil, err
		}
		if err := in.Validate(); err != nil {
			return nil, err
		}
		return c.backends.Jobs().MoveJob(ctx, c.tenant, c.id, in)
	})
}

// write runs one write: it checks the body's type and size, replays or
// reserves the Idempotency-Key, applies the change and remembers the
// answer for retries.
func (h *Handler) write(w http.ResponseWriter, r *http.Request, c *call,
	apply func(ctx context.Context, body []byte) (json.RawMessage, error)) error {
	return h.writeKeeping(w, r, c, func(ctx context.Context, body []byte) (json.RawMessage, json.RawMessage, error) {
		out, err := apply(ctx, body)
		return out, out, err
	})
}

// writeKeeping is write for an answer that holds what is given once:
// apply answers the first request with out and leaves kept, which says
// less, to be remembered for the key's replays.
func (h *Handler) writeKeeping(w http.ResponseWriter, r *http.Request, c *call,
	apply func(ctx context.Context, body []byte) (out, kept json.RawMessage, err error)) error {
	if r.URL.RawQuery != "" {
		if err := noQuery(r.URL.RawQuery); err != nil {
			return err
		}
	}
	body, err := h.readBody(w, r)
	if err != nil {
		return err
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		out, _, err := apply(r.Context(), body)
		if err != nil {
			return h.writeError(c, err)
		}
		writeBody(w, c.route.status, append(out, '\n'))
		return nil
	}
	if len(key) > 255 {
		return invalidParam("Idempotency-Key", "The Idempotency-Key header must be at most 255 characters.")
	}
	// Keys belong to the credential, so two integrations cannot collide.
	scoped := c.cred.ID + ":" + key
	sum := sha256.Sum256(append([]byte(r.Method+" "+r.URL.Path+"\n"), body...))
	fingerprint := hex.EncodeToString(sum[:])
	store := h.idempotency
	prior, err := store.Begin(r.Context(), scoped, fingerprint)
	if err != nil {
		return fmt.Errorf("reserving idempotency key: %w", err)
	}
	if prior != nil {
		switch {
		case prior.Fingerprint != fingerprint:
			return idempotency.ErrKeyReused
		case !prior.Done():
			return idempotency.ErrInProgress
		}
		w.Header().Set("Idempotent-Replayed", "true")
		writeBody(w, prior.Status, prior.Body)
		return nil
	}
	// The outcome is recorded with a context of its own: the caller
	// hanging up must not leave the key reserved.
	bg := context.WithoutCancel(r.Context())
	out, kept, err := apply(r.Context(), body)
	rec := idempotency.Record{Fingerprint: fingerprint, Status: c.route.status, Body: append(kept, '\n'), CreatedAt: time.Now()}
	var apiErr *apierror.Error
	if err != nil {
		apiErr = h.toAPIError(r, h.writeError(c, err))
		if apiErr.Status >= 500 {
			if aerr := store.Abandon(bg, scoped); aerr != nil {
				h.logger.Warn("releasing idempotency key", zap.Error(aerr))
			}
			return apiErr
		}
		rec.Status, rec.Body = apiErr.Status, apierror.Marshal(w, apiErr)
	}
	if ferr := store.Finish(bg, scoped, rec); ferr != nil {
		h.logger.Warn("remembering idempotent answer", zap.Error(ferr))
	}
	if apiErr != nil {
		apierror.Write(w, r, apiErr)
		return nil
	}
	writeBody(w, rec.Status, append(out, '\n'))
	return nil
}

// writeError names the record in a not-found answer.
func (h *Handler) writeError(c *call, err error) error {
	if errors.Is(err, practice.ErrNotFound) && c.id != "" {
		return notFound(c.route.kind, c.id)
	}
	return err
}

// readBody enforces the content type and the size cap.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil, apierror.New(http.StatusUnsupportedMediaType, "unsupported_media_type",
			"Send the request body as JSON with 'Content-Type: application/json'.")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, apierror.New(http.StatusRequestEntityTooLarge, "payload_too_large",
			fmt.Sprintf("The request body is larger than the %d bytes allowed.", h.MaxBodyBytes))
	}
	if err != nil {
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	return body, nil
}

// decodeBody reads a request body strictly, with the JSON library's strict
// (v2) semantics: one JSON object and nothing after it, each member named
// exactly as documented (case counts) and at most once, and no member the
// route does not take. Whatever it accepts is a body the route's type
// describes; everything else is a 400 that says what to fix.
func decodeBody(body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return apierror.New(http.StatusBadRequest, "invalid_json", "The request body is empty; send a JSON object.")
	}
	if trimmed[0] != '{' {
		if jsontext.Value(trimmed).IsValid() {
			return apierror.New(http.StatusBadRequest, "invalid_json", "The request body is "+jsonKind(trimmed[0])+"; send a JSON object.")
		}
		return apierror.New(http.StatusBadRequest, "invalid_json", "The request body is not a JSON object; send one.")
	}
	err := jsonv2.Unmarshal(body, v, jsonv2.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var semErr *jsonv2.SemanticError
	var synErr *jsontext.SyntacticError
	switch {
	case errors.As(err, &semErr) && errors.Is(semErr.Err, jsonv2.ErrUnknownName):
		field := pointerParam(semErr.JSONPointer)
		return apierror.New(http.StatusBadRequest, "parameter_unknown",
			fmt.Sprintf("The body has a field %q that this route does not accept (field names are case-sensitive).", field)).WithParam(field)
	case errors.As(err, &semErr) && semErr.GoType != nil && semErr.JSONPointer != "":
		field, t := pointerParam(semErr.JSONPointer), semErr.GoType
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		return apierror.New(http.StatusBadRequest, "parameter_invalid",
			fmt.Sprintf("The field %q must be %s.", field, jsonTypeName(t.Kind().String()))).WithParam(field)
	case errors.As(err, &synErr) && errors.Is(synErr.Err, jsontext.ErrDuplicateName):
		field := pointerParam(synErr.JSONPointer)
		return apierror.New(http.StatusBadRequest, "invalid_json",
			fmt.Sprintf("The body names the field %q more than once; send each field once.", field)).WithParam(field)
	}
	if errors.As(err, &synErr) {
		// The decoder's own words, without its byte offset, and the
		// member it was reading named as the error's param is.
		where := ""
		if field := pointerParam(synErr.JSONPointer); field != "" {
			where = fmt.Sprintf(" (in the field %q)", field)
		}
		if strings.Contains(synErr.Err.Error(), "after top-level value") {
			return apierror.New(http.StatusBadRequest, "invalid_json", "The request body has more after its JSON object; send the object alone.")
		}
		if errors.Is(synErr.Err, io.ErrUnexpectedEOF) {
			return apierror.New(http.StatusBadRequest, "invalid_json", "The request body ends before its JSON does"+where+"; send a whole JSON object.")
		}
		return apierror.New(http.StatusBadRequest, "invalid_json",
			"The request body is not valid JSON: "+strings.TrimPrefix(synErr.Err.Error(), "jsontext: ")+where+".")
	}
	return apierror.New(http.StatusBadRequest, "invalid_json", "The request body is not a JSON object with the fields this route takes.")
}

// jsonKind names the JSON value that starts with b, other than an object.
func jsonKind(b byte) string {
	switch b {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
}

// pointerParam names the member a JSON pointer points at as the error's
// param: "/contacts/0/role" is "contacts.0.role".
func pointerParam(p jsontext.Pointer) string {
	return strings.ReplaceAll(strings.TrimPrefix(string(p), "/"), "/", ".")
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "true or false"
	}
	return "a " + kind
}
