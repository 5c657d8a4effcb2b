package upstream_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
)

// stub answers with the scripted statuses in turn, then 200 {"ok":true}.
type stub struct {
	hits    atomic.Int64
	answers []func(w http.ResponseWriter, r *http.Request)
}

func (s *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(s.hits.Add(1)) - 1
	if n < len(s.answers) {
		s.answers[n](w, r)
		return
	}
	w.Write([]byte(`{"ok":true}`))
}

func status(code int, header ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		w.Write([]byte(`{"error":"scripted"}`))
	}
}

func newClient(t *testing.T, url string, p upstream.Policy, clock upstream.Clock, reg prometheus.Registerer) *upstream.Client {
	t.Helper()
	c, err := upstream.NewClient(upstream.Options{System: "test", BaseURL: url, Policy: p},
		upstream.Deps{Clock: clock, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRetriesAndErrors(t *testing.T) {
	cases := []struct {
		name     string
		method   string
		answers  []func(http.ResponseWriter, *http.Request)
		hits     int
		wantErr  error // nil: success
		retryAft time.Duration
		slept    int
	}{
		{"5xx on a read is retried", http.MethodGet, []func(http.ResponseWriter, *http.Request){status(500), status(502)}, 3, nil, 0, 2},
		{"5xx three times is unavailable", http.MethodGet, []func(http.ResponseWriter, *http.Request){status(500), status(503), status(500)}, 3, practice.ErrUnavailable, 0, 2},
		{"5xx on a write is not retried", http.MethodPost, []func(http.ResponseWriter, *http.Request){status(500)}, 1, practice.ErrUnavailable, 0, 0},
		{"429 with a short Retry-After waits it out", http.MethodGet, []func(http.ResponseWriter, *http.Request){status(429, "Retry-After", "2")}, 2, nil, 0, 1},
		{"429 on a write waits too: nothing was done", http.MethodPost, []func(http.ResponseWriter, *http.Request){status(429, "Retry-After", "1")}, 2, nil, 0, 1},
		{"429 with a long Retry-After fails at once", http.MethodGet, []func(http.ResponseWriter, *http.Request){status(429, "Retry-After", "120")}, 1, practice.ErrUnavailable, 120 * time.Second, 0},
		{"404 is not found, not retried", http.MethodGet, []func(http.ResponseWriter, *http.Request){status(404)}, 1, practice.ErrNotFound, 0, 0},
		{"409 is a conflict", http.MethodPut, []func(http.ResponseWriter, *http.Request){status(409)}, 1, practice.ErrConflict, 0, 0},
		{"401 is unavailable: the firm's credentials", http.MethodGet, []func(http.ResponseWriter, *http.Request){status(401)}, 1, practice.ErrUnavailable, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &stub{answers: tc.answers}
			srv := httptest.NewServer(s)
			defer srv.Close()
			clock := vendortest.NewClock(time.Unix(1_700_000_000, 0))
			c := newClient(t, srv.URL, upstream.Policy{RateLimit: -1}, clock, nil)
			_, err := c.Do(context.Background(), upstream.Request{Method: tc.method, Path: "/x", Body: []byte(`{}`)})
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got := int(s.hits.Load()); got != tc.hits {
				t.Errorf("hits = %d, want %d", got, tc.hits)
			}
			if ra, _ := practice.RetryAfter(err); ra != tc.retryAft {
				t.Errorf("RetryAfter = %v, want %v", ra, tc.retryAft)
			}
			if got := len(clock.Slept()); got != tc.slept {
				t.Errorf("slept %d times (%v), want %d", got, clock.Slept(), tc.slept)
			}
		})
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	s := &stub{answers: []func(http.ResponseWriter, *http.Request){status(429, "Retry-After", "3")}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	clock := vendortest.NewClock(time.Unix(1_700_000_000, 0))
	c := newClient(t, srv.URL, upstream.Policy{RateLimit: -1}, clock, nil)
	if _, err := c.Do(context.Background(), upstream.Request{Path: "/x"}); err != nil {
		t.Fatal(err)
	}
	if got := clock.Slept(); len(got) != 1 || got[0] != 3*time.Second {
		t.Fatalf("slept %v, want [3s]", got)
	}
}

func TestTimeoutHolds(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := newClient(t, srv.URL, upstream.Policy{Timeout: upstream.Duration(200 * time.Millisecond), MaxAttempts: 2, RateLimit: -1},
		vendortest.NewClock(time.Now()), nil)
	start := time.Now()
	_, err := c.Do(context.Background(), upstream.Request{Path: "/slow"})
	took := time.Since(start)
	if !errors.Is(err, practice.ErrUnavailable) {
		t.Fatalf("err = %v, want unavailable", err)
	}
	// Two attempts of 200 ms each, backoff slept on the fake clock.
	if took < 400*time.Millisecond || took > 2*time.Second {
		t.Fatalf("took %v, want about 400ms", took)
	}
}

// The breaker's open period passes on synctest's fake clock: the vendor
// answers through vendortest.Serve, in the caller's goroutine and without
// a socket, so the wait for the period to end is skipped, not slept.
func TestBreakerOpensAndRecovers(t *testing.T) {
	synctest.Test(t, breakerOpensAndRecovers)
}

func breakerOpensAndRecovers(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	var hits atomic.Int64
	const host = "vendor.test"
	vendor := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{}`))
	})
	reg := prometheus.NewRegistry()
	c, err := upstream.NewClient(upstream.Options{System: "test", BaseURL: "http://" + host, Policy: upstream.Policy{MaxAttempts: 1, BreakerFailures: 3,
		BreakerTimeout: upstream.Duration(150 * time.Millisecond), RateLimit: -1}},
		upstream.Deps{Clock: vendortest.NewClock(time.Now()), Registerer: reg, Transport: vendortest.Serve{Hosts: map[string]http.Handler{host: vendor}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if _, err := c.Do(ctx, upstream.Request{Path: "/x"}); !errors.Is(err, practice.ErrUnavailable) {
			t.Fatalf("err = %v", err)
		}
	}
	before := hits.Load()
	_, err = c.Do(ctx, upstream.Request{Path: "/x"})
	var u *practice.UnavailableError
	if !errors.As(err, &u) || u.RetryAfter <= 0 || u.RetryAfter > time.Second {
		t.Fatalf("open breaker: err = %v", err)
	}
	if hits.Load() != before {
		t.Fatal("an open breaker let a call through")
	}
	if got := metric(t, reg, "practicegw_upstream_breaker_state", "test"); got != 2 {
		t.Fatalf("breaker_state = %v, want 2 (open)", got)
	}
	down.Store(false)
	time.Sleep(200 * time.Millisecond)
	if _, err := c.Do(ctx, upstream.Request{Path: "/x"}); err != nil {
		t.Fatalf("after the open period: %v", err)
	}
	if got := metric(t, reg, "practicegw_upstream_breaker_state", "test"); got != 0 {
		t.Fatalf("breaker_state = %v, want 0 (closed)", got)
	}
	if n := metric(t, reg, "practicegw_upstream_requests_total", "test"); n < 4 {
		t.Fatalf("requests_total = %v", n)
	}
	// A second client on the same registry shares the collectors: that
	// is what lets any number of adapters register.
	if _, err := upstream.NewClient(upstream.Options{System: "other", BaseURL: "http://example.com"}, upstream.Deps{Registerer: reg}); err != nil {
		t.Fatalf("second client on one registry: %v", err)
	}
}

// metric sums a metric's series for one upstream label.
func metric(t *testing.T, reg *prometheus.Registry, name, upstreamLabel string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "upstream" && l.GetValue() == upstreamLabel {
					sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

func TestClientErrorsDoNotTrip(t *testing.T) {
	s := &stub{}
	for range 10 {
		s.answers = append(s.answers, status(400))
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := newClient(t, srv.URL, upstream.Policy{BreakerFailures: 2, RateLimit: -1}, vendortest.NewClock(time.Now()), nil)
	for range 10 {
		_, err := c.Do(context.Background(), upstream.Request{Path: "/x"})
		if se := (*practice.StatusError)(nil); !errors.As(err, &se) || se.Status != 400 {
			t.Fatalf("err = %v, want the 400", err)
		}
	}
	if s.hits.Load() != 10 {
		t.Fatalf("hits = %d: the breaker opened on 4xx", s.hits.Load())
	}
}

func TestMalformedJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"value": [1, 2`))
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, upstream.Policy{RateLimit: -1}, nil, nil)
	var v struct{ Value []int }
	_, err := c.JSON(context.Background(), upstream.Request{Path: "/x"}, "things", &v)
	if !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("err = %v, want bad upstream", err)
	}
}

func TestBudget(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	clock := vendortest.NewClock(time.Unix(1_700_000_000, 0))
	// 3 a minute: never more in any minute, so a burst of one, then one
	// every 20 s. Waits up to 5 s are sat out, longer ones fail with the
	// wait.
	c := newClient(t, srv.URL, upstream.Policy{RateLimit: 3, RatePeriod: upstream.Duration(time.Minute)}, clock, nil)
	ctx := context.Background()
	if _, err := c.Do(ctx, upstream.Request{Path: "/x"}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	_, err := c.Do(ctx, upstream.Request{Path: "/x"})
	ra, ok := practice.RetryAfter(err)
	if !ok || ra != 20*time.Second {
		t.Fatalf("second call: err = %v, retry after %v", err, ra)
	}
	clock.Advance(17 * time.Second)
	if _, err := c.Do(ctx, upstream.Request{Path: "/x"}); err != nil {
		t.Fatalf("after 17 s the 3 s wait is sat out: %v", err)
	}
	if hits.Load() != 2 {
		t.Fatalf("hits = %d, want 2", hits.Load())
	}
}

// A sync's call, which gives way and has no one waiting for it, waits
// its turn for the budget however long it takes; a call made without
// waiting (a first read's link, asked of another system) is refused at
// once, unsent, and says so; a client's call fails once its wait passes
// MaxRetryWait, as before.
func TestASyncWaitsItsTurnAndACallWithoutWaitingIsRefused(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	clock := vendortest.NewClock(time.Unix(1_700_000_000, 0))
	// 3 a minute: a burst of one, then one every 20 s, past the 5 s a
	// client's call waits.
	c := newClient(t, srv.URL, upstream.Policy{RateLimit: 3, RatePeriod: upstream.Duration(time.Minute)}, clock, nil)
	ctx := context.Background()
	if _, err := c.Do(ctx, upstream.Request{Path: "/x"}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	slept := len(clock.Slept())
	_, err := c.Do(upstream.WithoutWaiting(practice.GivingWay(ctx)), upstream.Request{Path: "/x"})
	if ra, ok := practice.RetryAfter(err); !ok || !upstream.Refused(err) || ra <= 0 || len(clock.Slept()) != slept || hits.Load() != 1 {
		t.Fatalf("a call without waiting: err = %v (refused %v), slept %v, %d sent", err, upstream.Refused(err), clock.Slept()[slept:], hits.Load())
	}
	if _, err := c.Do(ctx, upstream.Request{Path: "/x"}); err == nil || upstream.Refused(err) {
		t.Fatalf("a client's call 20 s from its turn: err = %v, want a plain unavailable", err)
	}
	start := clock.Now()
	for i := range 3 {
		if _, err := c.Do(practice.GivingWay(ctx), upstream.Request{Path: "/x"}); err != nil {
			t.Fatalf("sync call %d: %v", i, err)
		}
	}
	if waited := clock.Now().Sub(start); hits.Load() != 4 || waited < 40*time.Second {
		t.Fatalf("3 sync calls: %d sent in all, after %v; want each in its turn, 20 s apart", hits.Load(), waited)
	}
}

func TestRelativeRefusesOtherHosts(t *testing.T) {
	c := newClient(t, "https://api.karbonhq.com", upstream.Policy{}, nil, nil)
	if rel, err := c.Relative("https://api.karbonhq.com/v3/WorkItems?$skip=100"); err != nil || rel != "/v3/WorkItems?$skip=100" {
		t.Fatalf("rel = %q, %v", rel, err)
	}
	for _, link := range []string{"https://evil.example/v3/WorkItems", "http://api.karbonhq.com/v3/x"} {
		if _, err := c.Relative(link); !errors.Is(err, practice.ErrBadUpstream) {
			t.Errorf("%s: err = %v", link, err)
		}
	}
}

// TestBodies reads answers of every size in turn, as the pooled read
// buffers see them: each whole and its own, and one over MaxBodyBytes a
// bad upstream.
func TestBodies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Write(bytes.Repeat([]byte{byte('a' + n%26)}, n))
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, upstream.Policy{RateLimit: -1, MaxBodyBytes: 300_000}, nil, nil)
	sizes := []int{0, 70_000, 5, 300_000, 1}
	got := map[int][]byte{}
	for _, n := range sizes {
		resp, err := c.Do(context.Background(), upstream.Request{Path: "/", Query: url.Values{"n": {strconv.Itoa(n)}}})
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got[n] = resp.Body
	}
	for _, n := range sizes {
		if !bytes.Equal(got[n], bytes.Repeat([]byte{byte('a' + n%26)}, n)) {
			t.Errorf("%d bytes: read %d, %.10q", n, len(got[n]), got[n])
		}
	}
	_, err := c.Do(context.Background(), upstream.Request{Path: "/", Query: url.Values{"n": {"300001"}}})
	if !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("over the limit: %v", err)
	}
}

// LastSuccess is when the vendor last answered with success: a failed
// call leaves it where it was.
func TestLastSuccessIsTheLastAnswerThatSucceeded(t *testing.T) {
	s := &stub{answers: []func(http.ResponseWriter, *http.Request){status(404), func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{}`)) }, status(404)}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	start := time.Unix(1_700_000_000, 0)
	clock := vendortest.NewClock(start)
	c := newClient(t, srv.URL, upstream.Policy{RateLimit: -1}, clock, nil)
	if got := c.LastSuccess(); !got.IsZero() {
		t.Fatalf("before any call: %v, want zero", got)
	}
	for i, want := range []time.Time{{}, start.Add(2 * time.Minute), start.Add(2 * time.Minute)} {
		clock.Advance(time.Minute)
		_, _ = c.Do(context.Background(), upstream.Request{Path: "/x"})
		if got := c.LastSuccess(); !got.Equal(want) {
			t.Errorf("after call %d: %v, want %v", i+1, got, want)
		}
	}
}

// A call that gives way (a sync's poll) waits behind one that does not (a
// notification's read) asking for the same allowance after it: the
// allowance's next slot is the notification's, every time (both wait for
// the same slot; were the poll not to give way, either could have it).
func TestAPollGivesWay(t *testing.T) {
	var mu sync.Mutex
	var order []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		order = append(order, r.URL.Path)
		mu.Unlock()
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	// 4 a second: a burst of one, then one every 250 ms.
	c := newClient(t, srv.URL, upstream.Policy{RateLimit: 4, RatePeriod: upstream.Duration(time.Second)}, nil, nil)
	ctx := context.Background()
	for round := range 5 {
		if _, err := c.Do(ctx, upstream.Request{Path: "/first"}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := c.Do(practice.GivingWay(ctx), upstream.Request{Path: "/poll"}); err != nil {
				t.Error(err)
			}
		}()
		time.Sleep(60 * time.Millisecond)
		go func() {
			defer wg.Done()
			if _, err := c.Do(ctx, upstream.Request{Path: "/notified"}); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		mu.Lock()
		got := order[len(order)-2:]
		mu.Unlock()
		if got[0] != "/notified" || got[1] != "/poll" {
			t.Fatalf("round %d: calls in the order %v, want the notification's before the poll's", round, got)
		}
	}
}

// A call that gives way leaves half the allowance's burst to the calls
// that do not: a sync's polls, spending it, never leave a notification's
// read to wait for the allowance; and together they never make more
// calls than the allowance, whatever the interleaving.
func TestAPollLeavesHalfTheBurst(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{}`)) }))
	defer srv.Close()
	// Xero's 60 a minute: a burst of 6, then one every 60/55 s.
	p := upstream.Policy{RateLimit: 60, RatePeriod: upstream.Duration(time.Minute)}
	ctx := context.Background()
	call := func(c *upstream.Client, yield bool) {
		t.Helper()
		cctx := ctx
		if yield {
			cctx = practice.GivingWay(ctx)
		}
		if _, err := c.Do(cctx, upstream.Request{Path: "/x"}); err != nil {
			t.Fatal(err)
		}
	}
	clock := vendortest.NewClock(time.Unix(1_700_000_000, 0))
	c := newClient(t, srv.URL, p, clock, nil)
	for range 10 {
		call(c, true)
	}
	polled := clock.Slept()
	if len(polled) != 10-3 {
		t.Fatalf("10 polls slept %d times (%v): want the first 3 at once, half the burst", len(polled), polled)
	}
	for range 3 {
		call(c, false)
	}
	if got := clock.Slept(); len(got) != len(polled) {
		t.Fatalf("a notification's reads after the polls waited %v", got[len(polled):])
	}

	// Seeded interleavings of polls and reads: no minute holds more than
	// the allowance's 60 calls.
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		clock := vendortest.NewClock(time.Unix(1_700_000_000, 0))
		c := newClient(t, srv.URL, p, clock, nil)
		var at []time.Time
		for range 300 {
			if rng.IntN(3) == 0 {
				clock.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
			}
			call(c, rng.IntN(2) == 0)
			at = append(at, clock.Now())
		}
		for i := range at {
			j := i
			for j < len(at) && at[j].Sub(at[i]) < time.Minute {
				j++
			}
			if j-i > 60 {
				t.Fatalf("seed %d: %d calls within a minute from call %d", seed, j-i, i)
			}
		}
	}
}
