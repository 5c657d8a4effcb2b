package console

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// operation is one route of the OpenAPI document, as the explorer offers
// it.
type operation struct {
	ID         string
	Method     string
	Path       string
	Summary    string
	Scope      string // "" for public routes
	Tag        string
	Deprecated bool
	Params     []opParam
	// Body is an example request body built from the schema; "" when the
	// operation takes none.
	Body string
}

// opParam is a path, query or header parameter.
type opParam struct {
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

// Field is the form field that carries the parameter.
func (p opParam) Field() string { return p.In + "." + p.Name }

// InputID is the id of the parameter's input element.
func (p opParam) InputID() string { return "f-" + p.In + "-" + p.Name }

// Placeholder hints at what to type.
func (p opParam) Placeholder() string {
	switch {
	case p.Default != "":
		return p.Default
	case strings.HasPrefix(p.Pattern, "^") && strings.HasSuffix(p.Pattern, "_"):
		return strings.TrimPrefix(p.Pattern, "^") + "…"
	case p.Format == "date-time":
		return "2026-01-31T09:00:00Z"
	case p.Format == "date":
		return "2026-01-31"
	}
	return ""
}

type opGroup struct {
	Tag string
	Ops []*operation
}

// tagOrder lists the document's tags in the order a reader meets them.
var tagOrder = []string{"clients", "engagements", "jobs", "documents", "invoices", "people", "events", "webhooks", "meta"}

var methodOrder = map[string]int{"GET": 0, "POST": 1, "PATCH": 2, "PUT": 3, "DELETE": 4}

type openAPIDoc struct {
	Paths map[string]map[string]struct {
		OperationID string                `json:"operationId"`
		Summary     string                `json:"summary"`
		Tags        []string              `json:"tags"`
		Deprecated  bool                  `json:"deprecated"`
		Security    []map[string][]string `json:"security"`
		Parameters  []struct {
			Name        string         `json:"name"`
			In          string         `json:"in"`
			Description string         `json:"description"`
			Required    bool           `json:"required"`
			Schema      map[string]any `json:"schema"`
		} `json:"parameters"`
		RequestBody *struct {
			Content map[string]struct {
				Schema map[string]any `json:"schema"`
			} `json:"content"`
		} `json:"requestBody"`
	} `json:"paths"`
	Components struct {
		Schemas map[string]map[string]any `json:"schemas"`
	} `json:"components"`
}

// parseOperations reads the operations of an OpenAPI document, ordered by
// tag, path and method.
func parseOperations(raw []byte) ([]operation, error) {
	var doc openAPIDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	var ops []operation
	for p, methods := range doc.Paths {
		for m, o := range methods {
			op := operation{ID: o.OperationID, Method: strings.ToUpper(m), Path: p, Summary: o.Summary, Deprecated: o.Deprecated}
			if len(o.Tags) > 0 {
				op.Tag = o.Tags[0]
			}
			for _, s := range o.Security {
				if scopes := s["bearer"]; len(scopes) > 0 {
					op.Scope = scopes[0]
				}
			}
			for _, prm := range o.Parameters {
				op.Params = append(op.Params, paramOf(prm.Name, prm.In, prm.Description, prm.Required, prm.Schema))
			}
			sort.SliceStable(op.Params, func(i, j int) bool { return inRank(op.Params[i].In) < inRank(op.Params[j].In) })
			if o.RequestBody != nil {
				if c, ok := o.RequestBody.Content["application/json"]; ok {
					b, err := json.MarshalIndent(example(c.Schema, doc.Components.Schemas, 0), "", "  ")
					if err != nil {
						return nil, fmt.Errorf("example body of %s: %w", op.ID, err)
					}
					op.Body = string(b)
				}
			}
			ops = append(ops, op)
		}
	}
	sort.Slice(ops, func(i, j int) bool {
		a, b := ops[i], ops[j]
		if ta, tb := tagRank(a.Tag), tagRank(b.Tag); ta != tb {
			return ta < tb
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return methodOrder[a.Method] < methodOrder[b.Method]
	})
	return ops, nil
}

func tagRank(tag string) int {
	if i := slices.Index(tagOrder, tag); i >= 0 {
		return i
	}
	return len(tagOrder)
}

func inRank(in string) int {
	return map[string]int{"path": 0, "query": 1, "header": 2}[in]
}

func paramOf(name, in, desc string, required bool, schema map[string]any) opParam {
	p := opParam{Name: name, In: in, Description: desc, Required: required}
	p.Type, _ = schema["type"].(string)
	p.Format, _ = schema["format"].(string)
	p.Pattern, _ = schema["pattern"].(string)
	if d, ok := schema["default"]; ok {
		p.Default = fmt.Sprint(d)
	}
	if e, ok := schema["enum"].([]any); ok {
		for _, v := range e {
			p.Enum = append(p.Enum, fmt.Sprint(v))
		}
	}
	return p
}

// example builds a value matching schema, for a request body to start
// from.
func example(schema map[string]any, components map[string]map[string]any, depth int) any {
	if depth > 4 || schema == nil {
		return nil
	}
	if ref, ok := schema["$ref"].(string); ok {
		return example(components[strings.TrimPrefix(ref, "#/components/schemas/")], components, depth+1)
	}
	if alts, ok := schema["oneOf"].([]any); ok {
		for _, alt := range alts {
			if m, ok := alt.(map[string]any); ok && m["type"] != "null" {
				return example(m, components, depth+1)
			}
		}
		return nil
	}
	if e, ok := schema["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	typ := schema["type"]
	if types, ok := typ.([]any); ok {
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
