package upstream_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
)

// MaxConcurrent bounds the calls in flight however many callers there are.
func TestMaxConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var inFlight atomic.Int64
		release := make(chan struct{})
		tr := roundTrip(func(r *http.Request) (*http.Response, error) {
			inFlight.Add(1)
			defer inFlight.Add(-1)
			<-release
			return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(`{}`)), Request: r}, nil
		})
		c, err := upstream.NewClient(upstream.Options{System: "test", BaseURL: "https://vendor.example", MaxConcurrent: 3,
			Transport: tr, Policy: upstream.Policy{RateLimit: -1}}, upstream.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 12 {
			wg.Go(func() { _, _ = c.Do(context.Background(), upstream.Request{Path: "/"}) })
		}
		synctest.Wait() // every caller is sending or waiting for a slot
		if n := inFlight.Load(); n != 3 {
			t.Errorf("%d calls in flight, want 3", n)
		}
		close(release)
		wg.Wait()
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A 429 without Retry-After holds every call, unsent, for
// RateLimitedWait.
func TestRateLimitedWaitHoldsCalls(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	clock := vendortest.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	c, err := upstream.NewClient(upstream.Options{System: "test", BaseURL: srv.URL, RateLimitedWait: time.Minute},
		upstream.Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(context.Background(), upstream.Request{Path: "/"})
	if wait, _ := practice.RetryAfter(err); !errors.Is(err, practice.ErrUnavailable) || wait != time.Minute {
		t.Fatalf("the 429: %v", err)
	}
	clock.Advance(30 * time.Second)
	_, err = c.Do(context.Background(), upstream.Request{Path: "/"})
	if wait, _ := practice.RetryAfter(err); !errors.Is(err, practice.ErrUnavailable) || wait != 30*time.Second || hits.Load() != 1 {
		t.Fatalf("within the wait: %v, %d calls sent", err, hits.Load())
	}
	clock.Advance(31 * time.Second)
	if _, err := c.Do(context.Background(), upstream.Request{Path: "/"}); err != nil || hits.Load() != 2 {
		t.Fatalf("after the wait: %v, %d calls sent", err, hits.Load())
	}
}
