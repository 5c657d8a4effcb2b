package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Operation is one route of the table as a client calls it: what the
// console's request explorer offers, read from the same table as the
// router and the OpenAPI document.
type Operation struct {
	ID         string
	Method     string
	Path       string
	Summary    string
	Scope      string // "" for public routes
	Tag        string
	Deprecated bool
	// Stream is true for a route that answers a stream of server-sent
	// events rather than one response.
	Stream bool
	Params []Param
	// Body is an example request body built from the body's schema; ""
	// when the operation takes none.
	Body string
}

// Param is a path, query or header parameter of an operation.
type Param struct {
	Name        string
	In          string // path, query, header
	Description string
	Required    bool
	Type        string
	Format      string
	Pattern     string
	Default     string
	Enum        []string
}

// Operations lists every route of the table, in table order, with the
// given routes marked deprecated.
func Operations(deprecated []Deprecation) ([]Operation, error) {
	notices, err := deprecationNotices(deprecated)
	if err != nil {
		return nil, err
	}
	schemas := schemaSet{}
	ops := make([]Operation, 0, len(routes))
	for i := range routes {
		rt := &routes[i]
		_, dep := notices[rt]
		op := Operation{ID: rt.op, Method: rt.method, Path: rt.pattern, Summary: rt.summary, Scope: rt.scope,
			Tag: rt.tagName(), Deprecated: dep, Stream: rt.stream}
		for _, p := range rt.parameters() {
			op.Params = append(op.Params, paramOf(p))
		}
		if rt.body != nil {
			b, err := json.MarshalIndent(example(schemas.schemaOf(reflect.TypeOf(rt.body)), schemas, 0), "", "  ")
			if err != nil {
				return nil, fmt.Errorf("example body of %s: %w", rt.op, err)
			}
			op.Body = string(b)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func paramOf(p parameter) Param {
	out := Param{Name: p.name, In: p.in, Description: p.desc, Required: p.required}
	out.Type, _ = p.schema["type"].(string)
	out.Format, _ = p.schema["format"].(string)
	out.Pattern, _ = p.schema["pattern"].(string)
	if d, ok := p.schema["default"]; ok {
		out.Default = fmt.Sprint(d)
	}
	for _, v := range list(p.schema["enum"]) {
		out.Enum = append(out.Enum, fmt.Sprint(v))
	}
	return out
}

// list reads a schema keyword holding a list, whichever slice type built
// it.
func list(v any) []any {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice {
		return nil
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out
}

// example builds a value matching schema, for a request body to start
// from.
func example(schema map[string]any, components schemaSet, depth int) any {
	if depth > 4 || schema == nil {
		return nil
	}
	if ref, ok := schema["$ref"].(string); ok {
		c, _ := components[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
		return example(c, components, depth+1)
	}
	if alts, ok := schema["oneOf"]; ok {
		for _, alt := range list(alts) {
			if m, ok := alt.(map[string]any); ok && m["type"] != "null" {
				return example(m, components, depth+1)
			}
		}
		return nil
	}
	if e := list(schema["enum"]); len(e) > 0 {
		return e[0]
	}
	typ := schema["type"]
	if types := list(typ); types != nil {
		typ = nil
		for _, t := range types {
			if t != "null" {
				typ = t
				break
			}
		}
	}
	switch typ {
	case "object":
		out := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		for name, p := range props {
			if m, ok := p.(map[string]any); ok {
				out[name] = example(m, components, depth+1)
			}
		}
		return out
	case "array":
		if items, ok := schema["items"].(map[string]any); ok {
			if v := example(items, components, depth+1); v != nil {
				if _, isObj := v.(map[string]any); isObj {
					return []any{v}
				}
			}
		}
		return []any{}
	case "integer", "number":
		return 0
	case "boolean":
		return false
	case "string":
		switch schema["format"] {
		case "date-time":
			return "2026-01-31T09:00:00Z"
		case "date":
			return "2026-01-31"
		}
		return ""
	}
	return nil
}
