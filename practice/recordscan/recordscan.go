// Package recordscan checks a /v1 body for what a record must never hold:
// a zero time, a '<', '>' or '&' written as an HTML escape, or an empty
// string in a field the OpenAPI document declares nullable (a system that
// does not know a value leaves it null, never empty). Adapter tests scan
// the records each system makes; e2e tests scan what the real binary
// answers, sends and streams.
package recordscan

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Nullable is, by the object name a record carries ("client", "job"),
// the fields its schema declares nullable.
type Nullable map[string]map[string]bool

// FromOpenAPI reads the nullable fields of every component schema whose
// object property is a constant, as the records' and the events' are.
func FromOpenAPI(doc []byte) (Nullable, error) {
	var d struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("recordscan: read the OpenAPI document: %w", err)
	}
	out := Nullable{}
	for _, s := range d.Components.Schemas {
		var object struct {
			Const string `json:"const"`
		}
		if raw, ok := s.Properties["object"]; !ok || json.Unmarshal(raw, &object) != nil || object.Const == "" {
			continue
		}
		fields := map[string]bool{}
		for name, raw := range s.Properties {
			if nullable(raw) {
				fields[name] = true
			}
		}
		out[object.Const] = fields
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("recordscan: the OpenAPI document has no schema with a constant object")
	}
	return out, nil
}

// nullable reports whether a property's schema admits null: "type"
// listing "null", or a oneOf/anyOf with a {"type":"null"} branch.
func nullable(raw json.RawMessage) bool {
	var p struct {
		Type  json.RawMessage   `json:"type"`
		OneOf []json.RawMessage `json:"oneOf"`
		AnyOf []json.RawMessage `json:"anyOf"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return false
	}
	var types []string
	if json.Unmarshal(p.Type, &types) == nil && slices.Contains(types, "null") {
		return true
	}
	var one string
	if json.Unmarshal(p.Type, &one) == nil && one == "null" {
		return true
	}
	for _, alt := range append(p.OneOf, p.AnyOf...) {
		if nullable(alt) {
			return true
		}
	}
	return false
}

// Repository reads the nullable fields from the OpenAPI document the
// repository keeps beside its generated clients (client/openapi.json,
// which TestGeneratedClientsAreCurrent keeps as the gateway serves it).
func Repository(t testing.TB) Nullable {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("recordscan: no go.mod above the test's directory")
		}
		dir = parent
	}
	doc, err := os.ReadFile(filepath.Join(dir, "client", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := FromOpenAPI(doc)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Scan returns what body, a JSON document, holds that no record may:
// each problem with where it is (a JSON path). A body that is not JSON
// is a problem too.
func Scan(body []byte, nullable Nullable) []string {
	problems := escapes(body)
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return append(problems, fmt.Sprintf("not JSON: %v", err))
	}
	walk("$", v, nullable, &problems)
	return problems
}

// ScanEventStream scans each message's data of a text/event-stream body.
func ScanEventStream(body []byte, nullable Nullable) []string {
	var problems []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		for _, p := range Scan([]byte(strings.TrimPrefix(data, " ")), nullable) {
			problems = append(problems, fmt.Sprintf("line %d: %s", n, p))
		}
	}
	return problems
}

// Check fails t for each problem Scan finds in body; what names the body.
func Check(t testing.TB, what string, body []byte, nullable Nullable) {
	t.Helper()
	for _, p := range Scan(body, nullable) {
		t.Errorf("%s: %s", what, p)
	}
}

// escapes finds '<', '>' and '&' written as \u003c, \u003e and \u0026:
// JSON escapes HTML needs and the records' encoding never writes (a
// receiver compares names and paths byte for byte). A backslash is read
// with what it escapes, so "\\u003c" (a backslash, then the text u003c)
// is not one.
func escapes(body []byte) []string {
	var out []string
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' || i+1 >= len(body) {
			continue
		}
		if body[i+1] == 'u' && i+6 <= len(body) {
			switch strings.ToLower(string(body[i+2 : i+6])) {
			case "003c", "003e", "0026":
				out = append(out, fmt.Sprintf("byte %d: %s written as an HTML escape", i, body[i:i+6]))
			}
			i += 5
			continue
		}
		i++
	}
	return out
}

// walk checks every value under v: no zero time anywhere, and no empty
// string in a nullable field of an object that names its kind.
func walk(at string, v any, nullable Nullable, problems *[]string) {
	switch v := v.(type) {
	case string:
		if strings.HasPrefix(v, "0001-01-01") {
			*problems = append(*problems, fmt.Sprintf("%s: the zero time %q", at, v))
		}
	case []any:
		for i, e := range v {
			walk(fmt.Sprintf("%s[%d]", at, i), e, nullable, problems)
		}
	case map[string]any:
		object, _ := v["object"].(string)
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if s, ok := v[k].(string); ok && s == "" && nullable[object][k] {
				*problems = append(*problems, fmt.Sprintf("%s.%s: empty, where the %s schema declares it nullable", at, k, object))
			}
			walk(at+"."+k, v[k], nullable, problems)
		}
	}
}
