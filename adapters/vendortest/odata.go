package vendortest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// odataClause is one comparison of a $filter: Prop eq 'v', Prop ge v,
// Prop le v or contains(Prop, 'v'). Karbon documents these, joined by
// "and", and no others.
type odataClause struct {
	prop, op, value string
}

func parseFilter(s string, allowed []string) ([]odataClause, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []odataClause
	for _, part := range strings.Split(s, " and ") {
		part = strings.TrimSpace(part)
		part = strings.TrimSuffix(strings.TrimPrefix(part, "("), ")")
		var c odataClause
		if rest, ok := strings.CutPrefix(part, "contains("); ok {
			prop, val, ok := strings.Cut(strings.TrimSuffix(rest, ")"), ",")
			if !ok {
				return nil, fmt.Errorf("the query specified in the URI is not valid: %q", part)
			}
			c = odataClause{prop: strings.TrimSpace(prop), op: "contains", value: strings.TrimSpace(val)}
		} else {
			f := strings.SplitN(part, " ", 3)
			if len(f) != 3 {
				return nil, fmt.Errorf("the query specified in the URI is not valid: %q", part)
			}
			c = odataClause{prop: f[0], op: f[1], value: f[2]}
		}
		if c.op != "eq" && c.op != "ge" && c.op != "le" && c.op != "contains" {
			return nil, fmt.Errorf("the operator %q is not supported", c.op)
		}
		known := false
		for _, a := range allowed {
			known = known || a == c.prop
		}
		if !known {
			return nil, fmt.Errorf("Could not find a property named '%s' on type 'KarbonService.SummaryDTO'.", c.prop)
		}
		c.value = strings.ReplaceAll(strings.Trim(c.value, "'"), "''", "'")
		out = append(out, c)
	}
	return out, nil
}

func (c odataClause) match(v string) bool {
	switch c.op {
	case "eq":
		return v == c.value
	case "contains":
		return strings.Contains(strings.ToLower(v), strings.ToLower(c.value))
	case "ge":
		return v >= c.value
	case "le":
		return v != "" && v <= c.value
	}
	return false
}

// odataPage answers a Karbon list: $top at most 100, $skip, and an
// @odata.nextLink that repeats the query with the next $skip (the page
// itself with LoopNextLinks). The link is handed out: requests that follow
// it are the vendor's, not the client's.
func (k *Karbon) odataPage(w http.ResponseWriter, r *http.Request, entity string, rows []map[string]any, fields map[string]func(map[string]any) string) {
	base := k.URL
	q := r.URL.Query()
	top, skip := 100, 0
	if v := q.Get("$top"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			karbonError(w, http.StatusBadRequest, "4002", "The query parameter '$top' is not valid.")
			return
		}
		if n > 100 {
			karbonError(w, http.StatusBadRequest, "4002",
				fmt.Sprintf("The limit of '100' for Top query has been exceeded. The value from the incoming request is '%d'.", n))
			return
		}
		top = n
	}
	if v := q.Get("$skip"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			karbonError(w, http.StatusBadRequest, "4002", "The query parameter '$skip' is not valid.")
			return
		}
		skip = n
	}
	allowed := make([]string, 0, len(fields))
	for k := range fields {
		allowed = append(allowed, k)
	}
	sort.Strings(allowed)
	clauses, err := parseFilter(q.Get("$filter"), allowed)
	if err != nil {
		karbonError(w, http.StatusBadRequest, "4002", err.Error())
		return
	}
	var matched []map[string]any
	for _, row := range rows {
		ok := true
		for _, c := range clauses {
			ok = ok && c.match(fields[c.prop](row))
		}
		if ok {
			matched = append(matched, row)
		}
	}
	end := min(skip+top, len(matched))
	page := []map[string]any{}
	if skip < len(matched) {
		page = matched[skip:end]
	}
	body := map[string]any{
		"@odata.context": base + "/v3/$metadata#" + entity,
		"@odata.count":   len(matched),
		"value":          page,
	}
	switch {
	case k.loop:
		body["@odata.nextLink"] = base + r.URL.RequestURI()
	case end < len(matched):
		link := base + r.URL.EscapedPath() + "?" + nextQuery(r.URL.RawQuery, end)
		k.handOut(link)
		body["@odata.nextLink"] = link
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}

// nextQuery is the query of the page from skip, as an OData server writes
// it: the request's own query as sent, less its $skip, then
// $skip=<skip> (Karbon's links read "...?$skip=100").
func nextQuery(raw string, skip int) string {
	var kept []string
	for _, p := range strings.Split(raw, "&") {
		name, _, _ := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); p == "" || err == nil && n == "$skip" {
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(append(kept, "$skip="+strconv.Itoa(skip)), "&")
}

func karbonError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	writeJSON(w, status, b)
}
