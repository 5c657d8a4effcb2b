package oauthtoken_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"net/http/httptest"

	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/internal/testclock"
	redisstore "github.com/practicegw/practicegw/store/redis"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// strictEndpoint is tokenEndpoint counting what it refused: a refresh
// token already replaced is invalid_grant, stricter than Xero's grace
// period, so any double refresh shows.
type strictEndpoint struct {
	tokenEndpoint
	refused int
}

func (e *strictEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	e.tokenEndpoint.ServeHTTP(rec, r)
	e.mu.Lock()
	if rec.Code == http.StatusBadRequest {
		e.refused++
	}
	e.mu.Unlock()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

func (e *strictEndpoint) counts() (issued, refused int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.issued, e.refused
}

// instance is one gateway's handle on the shared Redis: its own client
// and store, as another process would have.
func instance(t *testing.T, srv *redistest.Server, key *sealed.Key) *redisstore.Store {
	t.Helper()
	rdb, err := redisstore.NewClient(srv.URL(), redisstore.TLSFiles{}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	st, err := redisstore.New(rdb, redisstore.Options{Timeout: 5 * time.Second, Secrets: key})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// sharedSource is a Source of one instance over st, logging to logs.
func sharedSource(t *testing.T, url string, st *redisstore.Store, locks upstream.Locks, clock *testclock.Clock, logs *zap.Logger) *oauthtoken.Source {
	return newXeroOAuth(t, url, upstream.Deps{Clock: clock, State: st, Locks: locks, Logger: logs}).
		WithLease(300*time.Millisecond, 5*time.Millisecond)
}

// noSecrets fails the test when a token or the client secret appears in
// text (a log line, an error).
func noSecrets(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range []string{"s3cret", "rt0", "rt1", "rt2", "tok1", "tok2"} {
		if strings.Contains(text, s) {
			t.Fatalf("%s shows a secret (%s): %s", what, s, text)
		}
	}
}

// The tokens are sealed in Redis: no value holds them in plain text.
func sealedAtRest(t *testing.T, srv *redistest.Server) {
	t.Helper()
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		var vals []string
		switch typ := rdb.Type(ctx, k).Val(); typ {
		case "string":
			vals = []string{rdb.Get(ctx, k).Val()}
		case "hash":
			vals = rdb.HVals(ctx, k).Val()
		}
		for _, v := range vals {
			if strings.Contains(v, "_token") || strings.Contains(v, "tok") {
				t.Fatalf("%s holds a token in plain text", k)
			}
		}
	}
}

// Two instances over one Redis, many concurrent Token calls on each,
// across several expiries: the endpoint sees exactly one refresh per
// expiry and never a refresh token it has already replaced, and every
// caller gets that expiry's token.
func TestRotatedTokenRefreshedOnceAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	key, _ := sealed.Random()
	ep := &strictEndpoint{tokenEndpoint: tokenEndpoint{current: "rt0"}}
	api := httptest.NewServer(ep)
	defer api.Close()
	clock := testclock.New(time.Unix(1_700_000_000, 0))
	core, logs := observer.New(zap.DebugLevel)
	var sources []*oauthtoken.Source
	for range 2 {
		st := instance(t, srv, key)
		sources = append(sources, sharedSource(t, api.URL, st, st.ReadModel(), clock, zap.New(core)))
	}

	const expiries, callers = 5, 8
	for round := 1; round <= expiries; round++ {
		want := fmt.Sprintf("tok%d", round)
		var wg sync.WaitGroup
		errs := make(chan error, 2*callers*3)
		for i := range 2 * callers {
			src := sources[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 {
					tok, err := src.Token(context.Background())
					if err == nil && tok != want {
						err = fmt.Errorf("token %q, want %q", tok, want)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			noSecrets(t, "an error", err.Error())
			t.Errorf("expiry %d: %v", round, err)
		}
		if issued, refused := ep.counts(); issued != round || refused != 0 {
			t.Fatalf("after expiry %d: %d refreshes, %d refused; want %d and none", round, issued, refused, round)
		}
		clock.Advance(30 * time.Minute) // past the 30-minute token's renewal
	}
	for _, e := range logs.All() {
		line := e.Message
		for k, v := range e.ContextMap() {
			line += fmt.Sprintf(" %s=%v", k, v)
		}
		noSecrets(t, "a log line", line)
	}
	sealedAtRest(t, srv)
}

// deadHolder is an instance that dies holding the lease: it never
// releases it.
type deadHolder struct{ upstream.Locks }

func (deadHolder) Release(context.Context, string, string) error { return nil }

// An instance killed mid-refresh (its request never answered, its lease
// never released) blocks the other only until the lease expires; the
// other then refreshes with the refresh token the vendor still accepts.
func TestKilledHolderLeaseExpires(t *testing.T) {
	srv := redistest.Start(t)
	key, _ := sealed.Random()
	ep := &strictEndpoint{tokenEndpoint: tokenEndpoint{current: "rt0"}}
	arrived, ended := make(chan struct{}), make(chan struct{})
	var first sync.Once
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hang := false
		first.Do(func() { hang = true })
		if hang {
			// The dying instance's request: it reaches the endpoint and
			// is never completed, so nothing rotates.
			close(arrived)
			select {
			case <-r.Context().Done():
			case <-ended:
			}
			return
		}
		ep.ServeHTTP(w, r)
	}))
	defer api.Close()
	defer close(ended)
	clock := testclock.New(time.Unix(1_700_000_000, 0))
	stA, stB := instance(t, srv, key), instance(t, srv, key)
	dying := sharedSource(t, api.URL, stA, deadHolder{stA.ReadModel()}, clock, zap.NewNop())
	other := sharedSource(t, api.URL, stB, stB.ReadModel(), clock, zap.NewNop())

	started := time.Now()
	ctxA, kill := context.WithCancel(context.Background())
	dead := make(chan error, 1)
	go func() {
		_, err := dying.Token(ctxA)
		dead <- err
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the dying instance never asked for a token")
	}
	done := make(chan error, 1)
	var got string
	go func() {
		var err error
		got, err = other.Token(context.Background())
		done <- err
	}()
	kill()
	if err := <-dead; err == nil {
		t.Fatal("the killed refresh succeeded")
	} else {
		noSecrets(t, "the killed instance's error", err.Error())
	}
	select {
	case err := <-done:
		if err != nil {
			noSecrets(t, "an error", err.Error())
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other instance never got a token")
	}
	if got != "tok1" {
		t.Fatalf("token %q, want tok1", got)
	}
	if held := time.Since(started); held < 300*time.Millisecond-5*time.Millisecond {
		t.Fatalf("the other refreshed after %v, inside the dead holder's lease", held)
	}
	if issued, refused := ep.counts(); issued != 1 || refused != 0 {
		t.Fatalf("%d refreshes, %d refused; want 1 and none", issued, refused)
	}
}
