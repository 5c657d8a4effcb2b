package api

import (
	"bytes"
	"errors"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/practice"
)

// Strict JSON means strict: what a lenient decoder would accept by
// guessing (the last of two values, a key in another case, data after the
// object) is refused with the contract's code.
func TestDecodeBodyIsStrict(t *testing.T) {
	for _, tt := range []struct {
		body, code, param string
	}{
		{`{"name":"A"}`, "", ""},
		{` {"name":"A","contacts":[{"name":"B","role":"primary"}]} `, "", ""},
		{`{"name":"A"}]`, "invalid_json", ""},
		{`{"name":"A"} {"name":"B"}`, "invalid_json", ""},
		{`{"name":"A"}x`, "invalid_json", ""},
		{`{"name":"A","name":"B"}`, "invalid_json", "name"},
		{`{"Name":"A"}`, "parameter_unknown", "Name"},
		{`{"NAME":"A"}`, "parameter_unknown", "NAME"},
		{`{"name":"A","nickname":"B"}`, "parameter_unknown", "nickname"},
		{`{"contacts":[{"name":"B","Role":"x"}]}`, "parameter_unknown", "contacts.0.Role"},
		{`{"name":1}`, "parameter_invalid", "name"},
		{`[]`, "invalid_json", ""},
		{``, "invalid_json", ""},
		{`{"name":"\xff"}`, "invalid_json", ""},
	} {
		var in practice.ClientInput
		err := decodeBody([]byte(tt.body), &in)
		if tt.code == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", tt.body, err)
			}
			continue
		}
		var e *apierror.Error
		if !errors.As(err, &e) || e.Status != 400 || e.Code != tt.code || e.Param != tt.param {
			t.Errorf("%s: %v, want 400 %s (param %q)", tt.body, err, tt.code, tt.param)
		}
	}
}

// clientFields are the members a client body may carry.
var clientFields = map[string]bool{"name": true, "type": true, "status": true, "owner": true, "email": true,
	"phone": true, "country": true, "contacts": true}

// strictlyValid checks a body independently of decodeBody: exactly one
// JSON object, its members each named once, exactly as documented.
func strictlyValid(body []byte) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	seen := map[string]bool{}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil || !clientFields[name.String()] || seen[name.String()] {
			return false
		}
		seen[name.String()] = true
		if _, err := dec.ReadValue(); err != nil {
			return false
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return false
	}
	_, err := dec.ReadToken()
	return err != nil && err.Error() == "EOF"
}

// FuzzDecodeBody: every error is a 400 with the contract's body, and every
// body accepted is strictly valid.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{`{"name":"x"}`, `{"name":1}`, `{"contacts":[{"name":"a","role":"primary"}]}`, `{`, `[]`,
		`{"x":1}`, `{} {}`, ``, `{"name":"A"}]`, `{"name":"A","name":"B"}`, `{"NAME":"A"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in practice.ClientInput
		err := decodeBody(body, &in)
		if err != nil {
			var e *apierror.Error
			if !errors.As(err, &e) || e.Status != 400 {
				t.Fatalf("%q: %v is not a 400 API error", body, err)
			}
			return
		}
		if !strictlyValid(body) {
			t.Fatalf("%q was accepted but is not one object with each documented field once", body)
		}
		_ = in.Validate(true)
	})
}
