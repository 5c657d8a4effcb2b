package ratelimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/store/credential"
)

// BenchmarkAllow measures one decision, in process and through Redis (one
// EVALSHA on loopback, pipelined with concurrent callers'), for one busy
// credential and for many.
func BenchmarkAllow(b *testing.B) {
	rate := Rate{Limit: 1_000_000, Window: time.Second}
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = "crd_" + strconv.Itoa(i)
	}
	run := func(b *testing.B, l *Limiter) {
		ctx := context.Background()
		b.Run("one-credential", func(b *testing.B) {
			for b.Loop() {
				l.Allow(ctx, "crd_bench", rate)
			}
		})
		parallel := func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					l.Allow(ctx, ids[i%len(ids)], rate)
					i++
				}
			})
		}
		b.Run("many-credentials-parallel", parallel)
		// As many callers as bench/ratelimit.sh has connections: with
		// Redis, their calls share batches.
		b.Run("many-credentials-32-callers", func(b *testing.B) {
			b.SetParallelism(max(32/runtime.GOMAXPROCS(0), 1))
			parallel(b)
		})
	}
	b.Run("local", func(b *testing.B) {
		l, err := New(Config{})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		run(b, l)
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		l, err := New(Config{Redis: srv.URL()})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		run(b, l)
		if l.Allow(context.Background(), "crd_bench", rate).Fallback {
			b.Fatal("the Redis benchmark measured the fallback")
		}
	})
}

// BenchmarkHandler measures what the module adds to a request around the
// decision itself: reading the credential, its rate, the headers and the
// metrics, with the in-process limiter.
func BenchmarkHandler(b *testing.B) {
	b.Setenv("PRACTICEGW_REDIS", "")
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	h := &Handler{}
	if err := h.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	defer h.Cleanup()
	// Sixteen credentials at a million a second each: the loop never
	// reaches a ceiling, so every request is admitted.
	var reqs []*http.Request
	for i := range 16 {
		cred := &credential.Credential{ID: "crd_bench" + strconv.Itoa(i), Firm: "frm_acme", RateLimit: "1000000/s"}
		r := httptest.NewRequest(http.MethodGet, "/v1/jobs", nil)
		reqs = append(reqs, r.WithContext(auth.WithCredential(r.Context(), cred)))
	}
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	w := httptest.NewRecorder()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		clear(w.HeaderMap)
		if err := h.ServeHTTP(w, reqs[i%len(reqs)], next); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if w.Code != http.StatusOK || w.Header().Get("RateLimit") == "" {
		b.Fatalf("answered %d with RateLimit %q", w.Code, w.Header().Get("RateLimit"))
	}
}
