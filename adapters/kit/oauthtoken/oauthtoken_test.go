package oauthtoken_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// tokenEndpoint is a vendor's token endpoint that rotates the refresh
// token on every grant, as Xero does, and refuses a refresh token it has
// already replaced.
type tokenEndpoint struct {
	mu      sync.Mutex
	grants  []string // grant_type:refresh_token of each request
	current string   // the one refresh token still accepted
	issued  int
	status  int // answered instead of a token when not zero
}

func (e *tokenEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r.ParseForm()
	grant, rt := r.Form.Get("grant_type"), r.Form.Get("refresh_token")
	e.grants = append(e.grants, grant+":"+rt)
	w.Header().Set("Content-Type", "application/json")
	if e.status != 0 {
		w.WriteHeader(e.status)
		fmt.Fprint(w, `{"error":"temporarily_unavailable"}`)
		return
	}
	if id, secret, ok := r.BasicAuth(); !ok || id != "app" || secret != "s3cret" {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
		return
	}
	if grant == "refresh_token" && rt != e.current {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"invalid_grant"}`)
		return
	}
	e.issued++
	e.current = fmt.Sprintf("rt%d", e.issued)
	json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("tok%d", e.issued), "expires_in": 1800,
		"token_type": "Bearer", "refresh_token": e.current})
}

func (e *tokenEndpoint) grant(i int) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if i >= len(e.grants) {
		return ""
	}
	return e.grants[i]
}

func newXeroOAuth(t *testing.T, url string, d upstream.Deps) *oauthtoken.Source {
	t.Helper()
	o, err := oauthtoken.New("xero", upstream.OAuth2Config{ClientID: "app", ClientSecret: "s3cret", RefreshToken: "rt0"},
		url, "basic", d)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOAuth2RefreshRotationSurvivesRestart(t *testing.T) {
	ep := &tokenEndpoint{current: "rt0"}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	clock := vendortest.NewClock(time.Unix(1_700_000_000, 0))
	state := changes.NewMemoryState() // what instances share (bbolt or Redis in the gateway)
	d := upstream.Deps{Clock: clock, State: state}
	o := newXeroOAuth(t, srv.URL, d)
	ctx := context.Background()

	if tok, err := o.Token(ctx); err != nil || tok != "tok1" {
		t.Fatalf("token %q, %v", tok, err)
	}
	if tok, _ := o.Token(ctx); tok != "tok1" || ep.grant(1) != "" {
		t.Fatal("a fresh token was fetched again")
	}
	clock.Advance(29 * time.Minute) // inside the minute before expiry
	if tok, err := o.Token(ctx); err != nil || tok != "tok2" {
		t.Fatalf("near expiry: token %q, %v; want a new one", tok, err)
	}
	if g := ep.grant(1); g != "refresh_token:rt1" {
		t.Fatalf("second grant %q: the rotated refresh token was not used", g)
	}
	if saved, _ := state.Last(ctx, "oauth2/xero/app/refresh_token"); string(saved) != "rt2" {
		t.Fatalf("saved refresh token %q, want rt2", saved)
	}

	// A new process (or another gateway on the same store) uses the access
	// token saved beside the refresh token while it is fresh, then
	// refreshes with rt2, not the configured rt0 the vendor no longer
	// accepts.
	o2 := newXeroOAuth(t, srv.URL, d)
	if tok, err := o2.Token(ctx); err != nil || tok != "tok2" || ep.grant(2) != "" {
		t.Fatalf("after restart: token %q, %v, grant %q; want the saved tok2 and no grant", tok, err, ep.grant(2))
	}
	clock.Advance(29 * time.Minute)
	if tok, err := o2.Token(ctx); err != nil || tok != "tok3" {
		t.Fatalf("after restart: token %q, %v, grant %q", tok, err, ep.grant(2))
	}
	if g := ep.grant(2); g != "refresh_token:rt2" {
		t.Fatalf("after restart: grant %q", g)
	}
}

func TestOAuth2ClientCredentials(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		got = append(got, r.Form.Get("grant_type"), r.Form.Get("client_id"), r.Form.Get("client_secret"), r.Form.Get("scope"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"app-token","token_type":"Bearer","expires_in":3599}`)
	}))
	defer srv.Close()
	o, err := oauthtoken.New("graph", upstream.OAuth2Config{ClientID: "app", ClientSecret: "s3cret",
		Scopes: []string{"https://graph.microsoft.com/.default"}}, srv.URL, "body", upstream.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := o.Token(context.Background()); err != nil || tok != "app-token" {
		t.Fatalf("token %q, %v", tok, err)
	}
	want := "client_credentials app s3cret https://graph.microsoft.com/.default"
	if strings.Join(got, " ") != want {
		t.Fatalf("form %q, want %q", strings.Join(got, " "), want)
	}
}

// A token endpoint that refuses, or never answers, fails the adapter's
// call as the upstream being unavailable (503 on /v1), within the call's
// timeout, and the request never reaches the API.
func TestOAuth2TokenEndpointFailureIsUpstreamError(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	refusing := httptest.NewServer(&tokenEndpoint{status: http.StatusServiceUnavailable})
	defer refusing.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the API was called without a token: %s", r.Header.Get("Authorization"))
	}))
	defer api.Close()

	for name, tokenURL := range map[string]string{"refused": refusing.URL, "hangs": hang.URL} {
		t.Run(name, func(t *testing.T) {
			auth := newXeroOAuth(t, tokenURL, upstream.Deps{})
			p := upstream.Policy{Timeout: upstream.Duration(200 * time.Millisecond), MaxAttempts: 1}
			c, err := upstream.NewClient(upstream.Options{System: "xero", BaseURL: api.URL, Policy: p, Auth: auth}, upstream.Deps{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = c.Do(ctx, upstream.Request{Path: "/Invoices"})
			var ue *practice.UnavailableError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v (%T), want an UnavailableError", err, err)
			}
			if ctx.Err() != nil {
				t.Fatal("the call waited past its own timeout")
			}
		})
	}
}

// failingSaves is a shared store that refuses saves while down.
type failingSaves struct {
	changes.StateStore
	mu   sync.Mutex
	down bool
}

func (f *failingSaves) Save(ctx context.Context, key string, v []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errors.New("store unavailable")
	}
	return f.StateStore.Save(ctx, key, v)
}

// A rotated refresh token is saved before the access token that came
// with it is used: while the store refuses the save, Token fails and
// hands out nothing, and once the store is back the same answer is saved
// and used, without a second refresh (which the vendor would refuse).
func TestRotatedTokenSavedBeforeUse(t *testing.T) {
	ep := &tokenEndpoint{current: "rt0"}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	state := &failingSaves{StateStore: changes.NewMemoryState(), down: true}
	o := newXeroOAuth(t, srv.URL, upstream.Deps{Clock: vendortest.NewClock(time.Unix(1_700_000_000, 0)), State: state})
	ctx := context.Background()

	tok, err := o.Token(ctx)
	var ue *practice.UnavailableError
	if err == nil || tok != "" || !errors.As(err, &ue) {
		t.Fatalf("with the store down: token %q, %v; want none and the upstream unavailable", tok, err)
	}
	if strings.Contains(err.Error(), "rt1") || strings.Contains(err.Error(), "tok1") {
		t.Fatalf("the error shows a token: %v", err)
	}
	if tok, err := o.Token(ctx); err == nil {
		t.Fatalf("the unsaved token %q was used", tok)
	}
	state.mu.Lock()
	state.down = false
	state.mu.Unlock()
	if tok, err := o.Token(ctx); err != nil || tok != "tok1" {
		t.Fatalf("with the store back: token %q, %v; want tok1", tok, err)
	}
	if g := ep.grant(1); g != "" {
		t.Fatalf("refreshed again (%s): the rotated token was lost", g)
	}
	if saved, _ := state.Last(ctx, "oauth2/xero/app/refresh_token"); string(saved) != "rt1" {
		t.Fatalf("saved refresh token %q, want rt1", saved)
	}
}
