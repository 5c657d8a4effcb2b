package console

import (
	"slices"
	"sort"
	"strings"

	"github.com/practicegw/practicegw/caddymodule/api"
)

// operation is one route of the API's table, as the explorer offers it.
type operation struct {
	ID         string
	Method     string
	Path       string
	Summary    string
	Scope      string // "" for public routes
	Tag        string
	Deprecated bool
	// Unsent says why the explorer does not send the operation; "" when
	// it does.
	Unsent string
	Params []opParam
	// Body is an example request body built from the schema; "" when the
	// operation takes none.
	Body string
}

// opParam is a path, query or header parameter of the API's table, with
// what the explorer's form needs of it.
type opParam api.Param

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
var tagOrder = []string{"clients", "engagements", "jobs", "documents", "invoices", "people", "events", "webhooks", "connections", "meta"}

var methodOrder = map[string]int{"GET": 0, "POST": 1, "PATCH": 2, "PUT": 3, "DELETE": 4}

// operationsOf orders the API's operations by tag, path and method, as a
// reader meets them.
func operationsOf(routes []api.Operation) []operation {
	ops := make([]operation, 0, len(routes))
	for _, rt := range routes {
		if !strings.HasPrefix(rt.Path, "/v1/") {
			// The browser's and the vendor's side of a consent: no API
			// call, and nothing a credential reaches.
			continue
		}
		op := operation{ID: rt.ID, Method: rt.Method, Path: rt.Path, Summary: rt.Summary, Scope: rt.Scope,
			Tag: rt.Tag, Deprecated: rt.Deprecated, Body: rt.Body, Unsent: unsent(rt)}
		for _, p := range rt.Params {
			op.Params = append(op.Params, opParam(p))
		}
		sort.SliceStable(op.Params, func(i, j int) bool { return inRank(op.Params[i].In) < inRank(op.Params[j].In) })
		ops = append(ops, op)
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
	return ops
}

// unsent says why the explorer, which sends with a sandbox credential of
// every scope but admin, cannot send an operation; "" when it can.
func unsent(rt api.Operation) string {
	switch {
	case rt.Stream:
		return "A stream of server-sent events, which the explorer cannot show: follow it with practicegw listen, or curl -N."
	case rt.Scope != "" && !slices.Contains(explorerScopes(), rt.Scope):
		return "A live credential with the " + rt.Scope + " scope sends these; the explorer's sandbox credential reaches the sandbox alone. The Systems page does what the connection routes do."
	}
	return ""
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
