package deploy

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The Grafana dashboard.

func TestDashboard(t *testing.T) {
	var dash map[string]any
	if err := json.Unmarshal(read(t, "grafana/practicegw-dashboard.json"), &dash); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	ids := map[float64]bool{}
	var exprs int
	var walk func(panels []any)
	walk = func(panels []any) {
		for _, p := range panels {
			pm := asMap(p)
			id, _ := pm["id"].(float64)
			if ids[id] {
				t.Errorf("panel %q: id %v is used twice", pm["title"], id)
			}
			ids[id] = true
			for _, tg := range asSlice(pm["targets"]) {
				expr := asString(asMap(tg)["expr"])
				if expr == "" {
					t.Errorf("panel %q: a target has no expr", pm["title"])
					continue
				}
				exprs++
				for _, m := range metricNames(expr) {
					used[m] = true
					if !slices.Contains(dashboardMetrics, m) {
						t.Errorf("panel %q queries %s, which is not one of practicegw's metrics: %s", pm["title"], m, expr)
					}
				}
			}
			walk(asSlice(pm["panels"]))
		}
	}
	walk(asSlice(dash["panels"]))
	for _, v := range asSlice(asMap(dash["templating"])["list"]) {
		vm := asMap(v)
		if asString(vm["type"]) != "query" {
			continue
		}
		q := vm["query"]
		if qm, ok := q.(map[string]any); ok {
			q = qm["query"]
		}
		if m := regexp.MustCompile(`label_values\(([^,)]*)`).FindStringSubmatch(asString(q)); m != nil {
			for _, name := range metricNames(m[1]) {
				if !slices.Contains(dashboardMetrics, name) {
					t.Errorf("variable %v queries %s, which is not one of practicegw's metrics", vm["name"], name)
				}
			}
		}
	}
	if exprs == 0 {
		t.Fatal("no queries found")
	}
	for _, m := range dashboardMetrics {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}

var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promVars     = regexp.MustCompile(`\$\{[^}]*\}|\$\w+`)
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset", "inf", "nan"}
)

// metricNames lists the metric names a PromQL expression reads: the
// identifiers left once strings, label matchers, ranges, grouping clauses,
// Grafana variables, function calls and keywords are set aside.
func metricNames(expr string) []string {
	expr = promStrings.ReplaceAllString(expr, `""`)
	expr = promVars.ReplaceAllString(expr, "")
	expr = promMatchers.ReplaceAllString(expr, " ")
	expr = promGrouping.ReplaceAllString(expr, " ")
	var names []string
	for _, loc := range promIdent.FindAllStringIndex(expr, -1) {
		name := expr[loc[0]:loc[1]]
		if loc[0] > 0 && (expr[loc[0]-1] >= '0' && expr[loc[0]-1] <= '9' || expr[loc[0]-1] == '.') {
			continue // the exponent or unit of a number: 1e3, 0.5
		}
		if rest := strings.TrimLeft(expr[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function
		}
		if slices.Contains(promKeywords, strings.ToLower(name)) {
			continue
		}
		names = append(names, name)
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (route) (rate(practicegw_requests_total{status=~"5.."}[$__rate_interval]))`:                          {"practicegw_requests_total"},
		`histogram_quantile(0.99, sum by (le) (rate(caddy_http_request_duration_seconds_bucket{handler!="x"}[5m])))`: {"caddy_http_request_duration_seconds_bucket"},
		`count(max by (upstream) (practicegw_upstream_breaker_state) == 2) or vector(0)`:                             {"practicegw_upstream_breaker_state"},
		`a / ignoring(x) group_left b offset 1h > bool 1e3`:                                                          {"a", "b"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %q, want %q", expr, got, want)
		}
	}
}
