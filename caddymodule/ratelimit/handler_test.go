package ratelimit

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/store/credential"
)

// provision sets up h as Caddy would, on a fresh metrics registry.
func provision(t *testing.T, h *Handler) (*Handler, *prometheus.Registry) {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := h.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Cleanup() })
	return h, ctx.GetMetricsRegistry()
}

var ok = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
	w.WriteHeader(http.StatusOK)
	return nil
})

func serve(t *testing.T, h *Handler, cred *credential.Credential) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/v1/clients", nil)
	if cred != nil {
		r = r.WithContext(auth.WithCredential(r.Context(), cred))
	}
	w := httptest.NewRecorder()
	if err := h.ServeHTTP(w, r, ok); err != nil {
		t.Fatalf("ServeHTTP returned %v; the limiter must answer, not fail", err)
	}
	return w
}

// inProcess keeps the environment from pointing tests at a Redis.
func inProcess(t *testing.T) {
	t.Setenv("PRACTICEGW_REDIS", "")
	t.Setenv("PRACTICEGW_RATE_LIMIT", "")
}

func TestHeadersOnAllowedAndRefused(t *testing.T) {
	inProcess(t)
	h, reg := provision(t, &Handler{Default: "10/s"})
	cred := &credential.Credential{ID: "crd_headers", Firm: "frm_acme"}

	w := serve(t, h, cred)
	if w.Code != http.StatusOK {
		t.Fatalf("first request: %d", w.Code)
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"default";q=10;w=1` {
		t.Fatalf("RateLimit-Policy %q", got)
	}
	if got := w.Header().Get("RateLimit"); got != `"default";r=9;t=1` {
		t.Fatalf("RateLimit %q", got)
	}
	if w.Header().Get("Retry-After") != "" {
		t.Fatal("Retry-After on an allowed response")
	}
	for range 9 {
		serve(t, h, cred)
	}

	w = serve(t, h, cred)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("11th request: %d, want 429", w.Code)
	}
	if got := w.Header().Get("Retry-After"); got != "1" {
		t.Fatalf("Retry-After %q, want 1 (100ms rounded up)", got)
	}
	if got := w.Header().Get("RateLimit"); got != `"default";r=0;t=1` {
		t.Fatalf("RateLimit on 429: %q", got)
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"default";q=10;w=1` {
		t.Fatalf("RateLimit-Policy on 429: %q", got)
	}
	var body map[string]map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("429 body %q: %v", w.Body, err)
	}
	e := body["error"]
	if e["code"] != "rate_limited" || e["message"] == "" || e["request_id"] != w.Header().Get("Request-Id") {
		t.Fatalf("429 body %s", w.Body)
	}
	t.Logf("429 message: %s", e["message"])

	if got := counter(t, reg, "practicegw_ratelimit_decisions_total", "outcome", "allowed"); got != 10 {
		t.Fatalf("allowed decisions counted %v, want 10", got)
	}
	if got := counter(t, reg, "practicegw_ratelimit_decisions_total", "outcome", "refused"); got != 1 {
		t.Fatalf("refused decisions counted %v, want 1", got)
	}
}

func TestNoCredentialPassesUntouched(t *testing.T) {
	inProcess(t)
	h, _ := provision(t, &Handler{Default: "1/h"})
	for range 5 {
		w := serve(t, h, nil)
		if w.Code != http.StatusOK || w.Header().Get("RateLimit") != "" || w.Header().Get("RateLimit-Policy") != "" {
			t.Fatalf("anonymous request: %d %v", w.Code, w.Header())
		}
	}
}

func TestCredentialOwnRateAndBurst(t *testing.T) {
	inProcess(t)
	h, _ := provision(t, &Handler{Default: "7200/h", Burst: 3})

	own := &credential.Credential{ID: "crd_own", RateLimit: "2/m"}
	serve(t, h, own)
	serve(t, h, own)
	w := serve(t, h, own)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("RateLimit-Policy") != `"default";q=2;w=60` {
		t.Fatalf("own rate: %d %v", w.Code, w.Header())
	}
	if got := w.Header().Get("Retry-After"); got != "30" {
		t.Fatalf("Retry-After %q, want 30 (one request's share of a minute)", got)
	}

	// Each rate is parsed once and kept: another rate gets its own policy.
	other := &credential.Credential{ID: "crd_other", RateLimit: "5/s"}
	if w := serve(t, h, other); w.Header().Get("RateLimit-Policy") != `"default";q=5;w=1` {
		t.Fatalf("another rate: %v", w.Header())
	}
	if w := serve(t, h, own); w.Header().Get("RateLimit-Policy") != `"default";q=2;w=60` {
		t.Fatalf("own rate again: %v", w.Header())
	}

	def := &credential.Credential{ID: "crd_default"}
	for i := range 3 {
		if w := serve(t, h, def); w.Code != http.StatusOK {
			t.Fatalf("request %d within burst 3: %d", i+1, w.Code)
		}
	}
	w = serve(t, h, def)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("RateLimit-Policy") != `"default";q=7200;w=3600` {
		t.Fatalf("4th request with burst 3: %d %v", w.Code, w.Header())
	}

	bad := &credential.Credential{ID: "crd_bad", RateLimit: "lots"}
	if w := serve(t, h, bad); w.Header().Get("RateLimit-Policy") != `"default";q=7200;w=3600` {
		t.Fatalf("unreadable credential rate: %v, want the default", w.Header())
	}
}

// A handler reads nothing from the environment itself: what it names
// none of comes from the practicegw app's configuration, which is where
// the environment's defaults are applied (tested with the app, in
// caddymodule/gateway); without the app, the table's default ceiling and
// no Redis, whatever PRACTICEGW_RATE_LIMIT and PRACTICEGW_REDIS say. A
// placeholder written in its configuration is expanded.
func TestDefaultIsNotReadFromTheEnvironment(t *testing.T) {
	t.Setenv("PRACTICEGW_REDIS", "redis://127.0.0.1:1/0")
	t.Setenv("PRACTICEGW_RATE_LIMIT", "5/m")
	h, _ := provision(t, &Handler{})
	if w := serve(t, h, &credential.Credential{ID: "crd_env"}); w.Header().Get("RateLimit-Policy") != `"default";q=7200;w=3600` {
		t.Fatalf("without the app: %v, want the table's default", w.Header())
	}
	if h.cfg.Redis != "" {
		t.Fatalf("without the app the handler took Redis %q from the environment", h.cfg.Redis)
	}

	h, _ = provision(t, &Handler{Default: "{env.PRACTICEGW_RATE_LIMIT}"})
	if w := serve(t, h, &credential.Credential{ID: "crd_env2"}); w.Header().Get("RateLimit-Policy") != `"default";q=5;w=60` {
		t.Fatalf("default {env.PRACTICEGW_RATE_LIMIT}: %v", w.Header())
	}

	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := (&Handler{Default: "often"}).Provision(ctx); err == nil {
		t.Fatal("Provision accepted default often")
	}
}

// TestStateSurvivesReload provisions a second handler with the same config
// before cleaning up the first, as a Caddy reload does.
func TestStateSurvivesReload(t *testing.T) {
	inProcess(t)
	cred := &credential.Credential{ID: "crd_reload"}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	old := &Handler{Default: "3/m"}
	if err := old.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		serve(t, old, cred)
	}
	h, _ := provision(t, &Handler{Default: "3/m"})
	if err := old.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if w := serve(t, h, cred); w.Code != http.StatusTooManyRequests {
		t.Fatalf("after reload: %d, want the spent bucket to be remembered", w.Code)
	}
	if h.Limiter() != old.Limiter() {
		t.Fatal("reload built a new limiter")
	}
}

func TestTwoHandlersShareMetrics(t *testing.T) {
	inProcess(t)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	for _, h := range []*Handler{{Default: "10/s"}, {Default: "20/s"}} {
		if err := h.Provision(ctx); err != nil {
			t.Fatalf("second handler on one registry: %v", err)
		}
		defer h.Cleanup()
		serve(t, h, &credential.Credential{ID: "crd_twohandlers"})
	}
	if got := counter(t, ctx.GetMetricsRegistry(), "practicegw_ratelimit_decisions_total", "outcome", "allowed"); got != 2 {
		t.Fatalf("allowed decisions counted %v, want 2 across both handlers", got)
	}
}

func TestHandlerWhenRedisIsDown(t *testing.T) {
	t.Setenv("PRACTICEGW_RATE_LIMIT", "")
	for _, tt := range []struct {
		fallback string
		code     int
		retry    string
	}{
		{"deny", http.StatusTooManyRequests, "1"},
		{"allow", http.StatusOK, ""},
		{"local", http.StatusOK, ""},
	} {
		t.Run(tt.fallback, func(t *testing.T) {
			h, reg := provision(t, &Handler{Redis: unreachableURL(t), Fallback: tt.fallback, Timeout: caddy.Duration(20 * time.Millisecond)})
			start := time.Now()
			w := serve(t, h, &credential.Credential{ID: "crd_down"})
			if took := time.Since(start); took > 100*time.Millisecond {
				t.Fatalf("request took %v with Redis down", took)
			}
			if w.Code != tt.code || w.Header().Get("Retry-After") != tt.retry || w.Header().Get("RateLimit") == "" {
				t.Fatalf("fallback %s: %d %v", tt.fallback, w.Code, w.Header())
			}
			if got := counter(t, reg, "practicegw_ratelimit_fallback_total", "mode", tt.fallback); got != 1 {
				t.Fatalf("fallback_total{mode=%s} = %v, want 1", tt.fallback, got)
			}
			if got := counter(t, reg, "practicegw_ratelimit_decisions_total", "outcome", "fallback"); got != 1 {
				t.Fatalf("decisions_total{outcome=fallback} = %v, want 1", got)
			}
		})
	}
}

// counter reads one labelled counter from reg; 0 when absent.
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
