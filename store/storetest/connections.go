package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/store/connection"
)

// ConnectionStore keeps firms' connections: caddymodule/connect's
// Connections, spelled out so that the suite imports no Caddy module.
type ConnectionStore interface {
	CreateConnection(ctx context.Context, c connection.Connection) (connection.Connection, error)
	Connection(ctx context.Context, id string) (connection.Connection, error)
	Connections(ctx context.Context, firm string) ([]connection.Connection, error)
	UpdateConnection(ctx context.Context, c connection.Connection, version int64) (connection.Connection, error)
}

// AuthorizationStore keeps the consents awaited: caddymodule/connect's
// Authorizations.
type AuthorizationStore interface {
	SaveAuthorization(ctx context.Context, a connection.Authorization) error
	StartAuthorization(ctx context.Context, token, browser string, now time.Time) (connection.Authorization, error)
	TakeAuthorization(ctx context.Context, state, browser string, now time.Time) (connection.Authorization, error)
}

// ConnectStore is both, as each backend's Store is.
type ConnectStore interface {
	ConnectionStore
	AuthorizationStore
}

// ConnectionsBackend is one backend's state, empty at first, as the
// Connections suite drives it.
type ConnectionsBackend struct {
	// Open is a handle on the state that seals under key; two calls are
	// two handles, as two instances (or a restart) hold them. Its error
	// is the one a process starting with key would stop with.
	Open func(key *sealed.Key) (ConnectStore, error)
	// Raw is every key and value the backend holds, concatenated.
	Raw func() []byte
	// CopyAuthorization stores the consent kept for state from, as
	// stored, where the consent of state to would be kept: what someone
	// with write access to the store could do to swap verifiers.
	CopyAuthorization func(from, to string)
}

// Connections checks a backend's connections and authorizations: reads
// and lists, compare-and-set under racing writers, a consent's start link
// used once across instances and binding it to one browser, its state
// used once and by that browser alone, both refused after they expire,
// and the PKCE verifier sealed. fresh returns a backend with an empty
// state.
func Connections(t *testing.T, fresh func(t *testing.T) ConnectionsBackend) {
	key, _ := sealed.Random()
	open := func(t *testing.T, b ConnectionsBackend) ConnectStore {
		t.Helper()
		st, err := b.Open(key)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, tt := range []struct {
		name string
		fn   func(t *testing.T, a, b ConnectStore)
	}{
		{"CreateAndRead", testCreateConnection},
		{"ListOldestFirst", testListConnections},
		{"CompareAndSet", testUpdateConnection},
		{"RacingUpdates", testRacingUpdates},
		{"AuthorizationUsedOnce", testTakeAuthorization},
		{"AuthorizationExpires", testAuthorizationExpires},
		{"AuthorizationRacingTakers", testRacingTakers},
		{"StartUsedOnce", testStartOnce},
		{"StartExpires", testStartExpires},
		{"StartRacingBrowsers", testRacingStarters},
		{"AuthorizationBoundToItsBrowser", testOtherBrowser},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := fresh(t)
			tt.fn(t, open(t, b), open(t, b))
		})
	}

	t.Run("VerifierSealed", func(t *testing.T) {
		b := fresh(t)
		st := open(t, b)
		auths := []connection.Authorization{authorization("state-sealed-one"), authorization("state-sealed-two")}
		for _, a := range auths {
			if err := st.SaveAuthorization(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		start(t, st, auths[0], browserA)
		raw := b.Raw()
		if len(raw) == 0 {
			t.Fatal("the backend holds nothing")
		}
		for _, a := range auths {
			// The state, the start token and the browser's value are kept
			// out too: with them and a code, a copy of the store would
			// finish someone's consent.
			for _, secret := range []string{a.Verifier, a.OAuthState, a.Start, browserA} {
				if bytes.Contains(raw, []byte(secret)) {
					t.Errorf("the backend holds %q in plain text", secret)
				}
			}
		}
		got, err := open(t, b).TakeAuthorization(ctx, auths[0].OAuthState, browserA, time.Now())
		if err != nil || !sameAuthorization(got, auths[0]) {
			t.Fatalf("taken %+v, %v; saved %+v", got, err, auths[0])
		}
	})

	t.Run("VerifierBoundToItsState", func(t *testing.T) {
		b := fresh(t)
		st := open(t, b)
		a := authorization("state-original")
		if err := st.SaveAuthorization(ctx, a); err != nil {
			t.Fatal(err)
		}
		start(t, st, a, browserA)
		b.CopyAuthorization(a.OAuthState, "state-elsewhere")
		got, err := st.TakeAuthorization(ctx, "state-elsewhere", browserA, time.Now())
		if !errors.Is(err, sealed.ErrDamaged) || got.Verifier != "" {
			t.Fatalf("a consent copied under another state was taken: %+v, %v; want sealed.ErrDamaged", got, err)
		}
		if got, err := st.TakeAuthorization(ctx, a.OAuthState, browserA, time.Now()); err != nil || !sameAuthorization(got, a) {
			t.Fatalf("the original: %+v, %v", got, err)
		}
	})

	t.Run("VerifierNeedsTheKey", func(t *testing.T) {
		b := fresh(t)
		a := authorization("state-other-key")
		if err := open(t, b).SaveAuthorization(ctx, a); err != nil {
			t.Fatal(err)
		}
		other, _ := sealed.Random()
		st, err := b.Open(other)
		if err != nil {
			// A backend that checks its key at start refuses to open.
			if !errors.Is(err, sealed.ErrWrongKey) {
				t.Fatalf("opened under another key: %v, want sealed.ErrWrongKey", err)
			}
			return
		}
		got, err := st.StartAuthorization(ctx, a.Start, browserA, time.Now())
		if !errors.Is(err, sealed.ErrWrongKey) || got.Verifier != "" {
			t.Fatalf("started under another key: %+v, %v; want sealed.ErrWrongKey", got, err)
		}
	})
}

// conn is a connection as caddymodule/connect creates one, every field
// set so that a field a backend drops shows.
func conn(id, firm string, created time.Time) connection.Connection {
	connected := created.Add(time.Minute)
	return connection.Connection{ID: id, Firm: firm, Role: "ledger", System: "xero", Status: connection.ChooseOrganisation,
		Reason: "the grant reaches 2 organisations", OrganisationID: "tnt-1", OrganisationName: "Hollis & Vane <Ltd>",
		Choices: []connection.Organisation{{ID: "tnt-1", Name: "Hollis & Vane <Ltd>"}, {ID: "tnt-2", Name: "Hollis Trust"}},
		Attempt: 2, CreatedAt: created, UpdatedAt: created, ConnectedAt: &connected}
}

// sameConnection compares by JSON, which is how the API shows a
// connection: times equal as instants, nil and empty alike.
func sameConnection(a, b connection.Connection) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func testCreateConnection(t *testing.T, st, other ConnectStore) {
	want := conn("con_a", "frm_acme", t0)
	want.Version = 7 // the store numbers versions itself
	got, err := st.CreateConnection(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	want.Version = 1
	if !sameConnection(got, want) {
		t.Fatalf("created %+v, want %+v", got, want)
	}
	read, err := other.Connection(ctx, "con_a")
	if err != nil || !sameConnection(read, want) {
		t.Fatalf("read back %+v (%v), want %+v", read, err, want)
	}

	taken := conn("con_a", "frm_other", t0.Add(time.Hour))
	if _, err := other.CreateConnection(ctx, taken); !errors.Is(err, connection.ErrExists) {
		t.Fatalf("created over a taken id: %v, want connection.ErrExists", err)
	}
	if read, _ := st.Connection(ctx, "con_a"); !sameConnection(read, want) {
		t.Fatalf("a refused create changed the stored connection to %+v", read)
	}
	if _, err := st.Connection(ctx, "con_missing"); !errors.Is(err, connection.ErrNotFound) {
		t.Fatalf("unknown id: %v, want connection.ErrNotFound", err)
	}
}

func testListConnections(t *testing.T, st, other ConnectStore) {
	if all, err := st.Connections(ctx, ""); err != nil || len(all) != 0 {
		t.Fatalf("an empty store lists %v, %v", all, err)
	}
	// Created out of id order, two at the same instant (id breaks the
	// tie), across two firms and two handles.
	for i, c := range []connection.Connection{
		conn("con_d", "frm_acme", t0.Add(2*time.Minute)),
		conn("con_c", "frm_beta", t0),
		conn("con_a", "frm_acme", t0.Add(time.Minute)),
		conn("con_b", "frm_acme", t0),
	} {
		if _, err := []ConnectStore{st, other}[i%2].CreateConnection(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(cs []connection.Connection) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.ID
		}
		return out
	}
	for firm, want := range map[string][]string{
		"":           {"con_b", "con_c", "con_a", "con_d"},
		"frm_acme":   {"con_b", "con_a", "con_d"},
		"frm_beta":   {"con_c"},
		"frm_absent": {},
	} {
		for _, h := range []ConnectStore{st, other} {
			got, err := h.Connections(ctx, firm)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(got), want) {
				t.Errorf("firm %q lists %v, want %v", firm, ids(got), want)
			}
		}
	}
	all, _ := other.Connections(ctx, "frm_acme")
	if want := conn("con_b", "frm_acme", t0); len(all) == 0 || all[0].Version != 1 || all[0].OrganisationName != want.OrganisationName ||
		len(all[0].Choices) != 2 {
		t.Fatalf("listed %+v, want it whole", all)
	}
}

func testUpdateConnection(t *testing.T, st, other ConnectStore) {
	c, err := st.CreateConnection(ctx, conn("con_u", "frm_acme", t0))
	if err != nil {
		t.Fatal(err)
	}
	c.Status, c.Reason, c.Choices, c.UpdatedAt = connection.Connected, "", nil, t0.Add(time.Hour)
	got, err := other.UpdateConnection(ctx, c, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := c
	want.Version = 2
	if !sameConnection(got, want) {
		t.Fatalf("updated %+v, want %+v", got, want)
	}
	if read, _ := st.Connection(ctx, "con_u"); !sameConnection(read, want) {
		t.Fatalf("read back %+v, want %+v", read, want)
	}

	// A writer that read version 1 comes second: refused, nothing
	// written, whatever version its copy claims.
	stale := c
	stale.Status, stale.Version = connection.NeedsReconnect, 5
	if _, err := st.UpdateConnection(ctx, stale, 1); !errors.Is(err, connection.ErrVersion) {
		t.Fatalf("a stale write: %v, want connection.ErrVersion", err)
	}
	if _, err := st.UpdateConnection(ctx, stale, 3); !errors.Is(err, connection.ErrVersion) {
		t.Fatalf("a write from the future: %v, want connection.ErrVersion", err)
	}
	if read, _ := other.Connection(ctx, "con_u"); !sameConnection(read, want) {
		t.Fatalf("a refused write left %+v, want %+v", read, want)
	}
	if _, err := st.UpdateConnection(ctx, conn("con_missing", "frm_acme", t0), 1); !errors.Is(err, connection.ErrNotFound) {
		t.Fatalf("updating an unknown id: %v, want connection.ErrNotFound", err)
	}
	if _, err := st.Connection(ctx, "con_missing"); !errors.Is(err, connection.ErrNotFound) {
		t.Fatalf("an update of an unknown id created it: %v", err)
	}

	// A connection is its firm's for good: the per-firm lists depend on it.
	moved := want
	moved.Firm = "frm_other"
	if _, err := other.UpdateConnection(ctx, moved, 2); err == nil {
		t.Fatal("a connection moved to another firm")
	}
	if read, _ := st.Connection(ctx, "con_u"); !sameConnection(read, want) {
		t.Fatalf("a refused move left %+v, want %+v", read, want)
	}
	if list, _ := st.Connections(ctx, "frm_other"); len(list) != 0 {
		t.Fatalf("listed under the other firm: %+v", list)
	}
}

// testRacingUpdates has writers on two handles read, change and write one
// connection until each has won rounds times, as instances do when a
// callback, a refused refresh and an administrator's request meet. Each
// version is won exactly once, the versions run without a gap, and the
// stored connection is the last winner's.
func testRacingUpdates(t *testing.T, st, other ConnectStore) {
	if _, err := st.CreateConnection(ctx, conn("con_race", "frm_acme", t0)); err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 8, 10
	var (
		mu  sync.Mutex
		won = map[int64]string{} // version -> the reason its winner wrote
	)
	var wg sync.WaitGroup
	for w := range writers {
		h := []ConnectStore{st, other}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; {
				c, err := h.Connection(ctx, "con_race")
				if err != nil {
					t.Error(err)
					return
				}
				c.Reason = fmt.Sprintf("writer %d round %d", w, r)
				got, err := h.UpdateConnection(ctx, c, c.Version)
				if errors.Is(err, connection.ErrVersion) {
					continue // another came first: read again
				}
				if err != nil {
					t.Error(err)
					return
				}
				if got.Version != c.Version+1 || got.Reason != c.Reason {
					t.Errorf("wrote version %d over %d: %+v", got.Version, c.Version, got)
				}
				mu.Lock()
				if prev, ok := won[got.Version]; ok {
					t.Errorf("version %d won twice: by %q and %q", got.Version, prev, c.Reason)
				}
				won[got.Version] = c.Reason
				mu.Unlock()
				r++
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	last := int64(1 + writers*rounds)
	for v := int64(2); v <= last; v++ {
		if _, ok := won[v]; !ok {
			t.Errorf("version %d was never won", v)
		}
	}
	final, err := other.Connection(ctx, "con_race")
	if err != nil {
		t.Fatal(err)
	}
	if final.Version != last || final.Reason != won[last] {
		t.Fatalf("stored version %d %q, want the last winner's: version %d %q", final.Version, final.Reason, last, won[last])
	}
}

// authorization is a consent awaited, expiring AuthorizationTTL from the
// wall clock: a shared store keeps it for as long as that.
func authorization(state string) connection.Authorization {
	return connection.Authorization{OAuthState: state, Start: "start-of-" + state, Connection: "con_a", Firm: "frm_acme", Attempt: 3,
		Verifier: "pkce-verifier-of-" + state + "-dBjftJeZ4CVP-mB92K27uhbUJU1p1r",
		Expires:  time.Now().Add(connection.AuthorizationTTL).Round(time.Millisecond).UTC()}
}

func sameAuthorization(a, b connection.Authorization) bool {
	return a.OAuthState == b.OAuthState && a.Connection == b.Connection && a.Firm == b.Firm && a.Attempt == b.Attempt &&
		a.Verifier == b.Verifier && a.Expires.Equal(b.Expires)
}

// The values of two browsers' cookies, as caddymodule/connect makes them.
const (
	browserA = "browser-a-Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0"
	browserB = "browser-b-YmFyYmF6cXV4Zm9vY29yZ2VncmF1bHRxdXV4"
)

// start saves nothing: it follows a's start link in browser, failing t
// unless that starts a.
func start(t *testing.T, st ConnectStore, a connection.Authorization, browser string) {
	t.Helper()
	got, err := st.StartAuthorization(ctx, a.Start, browser, time.Now())
	if err != nil || !sameAuthorization(got, a) {
		t.Fatalf("started %+v, %v; saved %+v", got, err, a)
	}
}

// saveStarted saves a and starts it in browser.
func saveStarted(t *testing.T, st ConnectStore, a connection.Authorization, browser string) {
	t.Helper()
	if err := st.SaveAuthorization(ctx, a); err != nil {
		t.Fatal(err)
	}
	start(t, st, a, browser)
}

func testTakeAuthorization(t *testing.T, st, other ConnectStore) {
	a := authorization("state-once")
	saveStarted(t, st, a, browserA)
	saveStarted(t, st, authorization("state-kept"), browserA)
	got, err := other.TakeAuthorization(ctx, a.OAuthState, browserA, time.Now())
	if err != nil || !sameAuthorization(got, a) {
		t.Fatalf("taken %+v, %v; saved %+v", got, err, a)
	}
	for _, h := range []ConnectStore{st, other} {
		if _, err := h.TakeAuthorization(ctx, a.OAuthState, browserA, time.Now()); !errors.Is(err, connection.ErrNotFound) {
			t.Fatalf("taken twice: %v, want connection.ErrNotFound", err)
		}
	}
	if _, err := st.TakeAuthorization(ctx, "state-never-saved", browserA, time.Now()); !errors.Is(err, connection.ErrNotFound) {
		t.Fatalf("an unknown state: %v, want connection.ErrNotFound", err)
	}
	if _, err := st.TakeAuthorization(ctx, "state-kept", browserA, time.Now()); err != nil {
		t.Fatalf("taking one state took another: %v", err)
	}
}

func testAuthorizationExpires(t *testing.T, st, other ConnectStore) {
	a := authorization("state-expiring")
	saveStarted(t, st, a, browserA)
	// Expired at its Expires: a consent has AuthorizationTTL, not a
	// moment more.
	if _, err := other.TakeAuthorization(ctx, a.OAuthState, browserA, a.Expires); !errors.Is(err, connection.ErrNotFound) {
		t.Fatalf("taken at its expiry: %v, want connection.ErrNotFound", err)
	}
	// An expired consent is gone, not kept for a clock that reads earlier.
	if _, err := st.TakeAuthorization(ctx, a.OAuthState, browserA, a.Expires.Add(-time.Minute)); !errors.Is(err, connection.ErrNotFound) {
		t.Fatalf("taken after it expired once: %v, want connection.ErrNotFound", err)
	}

	b := authorization("state-in-time")
	saveStarted(t, st, b, browserA)
	if got, err := other.TakeAuthorization(ctx, b.OAuthState, browserA, b.Expires.Add(-time.Millisecond)); err != nil || !sameAuthorization(got, b) {
		t.Fatalf("taken a millisecond before its expiry: %+v, %v", got, err)
	}
}

// testStartOnce follows a start link twice, on either instance: the first
// starts the consent, every other is refused, as is a token never saved.
func testStartOnce(t *testing.T, st, other ConnectStore) {
	a := authorization("state-started-once")
	if err := st.SaveAuthorization(ctx, a); err != nil {
		t.Fatal(err)
	}
	start(t, other, a, browserA)
	for _, h := range []ConnectStore{st, other} {
		for _, browser := range []string{browserA, browserB} {
			if got, err := h.StartAuthorization(ctx, a.Start, browser, time.Now()); !errors.Is(err, connection.ErrNotFound) {
				t.Fatalf("started twice: %+v, %v; want connection.ErrNotFound", got, err)
			}
		}
	}
	if _, err := st.StartAuthorization(ctx, "start-never-saved", browserA, time.Now()); !errors.Is(err, connection.ErrNotFound) {
		t.Fatalf("an unknown start token: %v, want connection.ErrNotFound", err)
	}
	// The state can be presented as a token: it starts nothing.
	if _, err := st.StartAuthorization(ctx, a.OAuthState, browserB, time.Now()); !errors.Is(err, connection.ErrNotFound) {
		t.Fatalf("the state as a start token: %v, want connection.ErrNotFound", err)
	}
	if _, err := other.TakeAuthorization(ctx, a.OAuthState, browserA, time.Now()); err != nil {
		t.Fatalf("the started consent: %v", err)
	}
}

// testStartExpires: a start link lives as long as its consent.
func testStartExpires(t *testing.T, st, other ConnectStore) {
	a := authorization("state-start-expiring")
	if err := st.SaveAuthorization(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got, err := other.StartAuthorization(ctx, a.Start, browserA, a.Expires); !errors.Is(err, connection.ErrNotFound) {
		t.Fatalf("started at its expiry: %+v, %v; want connection.ErrNotFound", got, err)
	}
	if _, err := st.StartAuthorization(ctx, a.Start, browserA, a.Expires.Add(-time.Minute)); !errors.Is(err, connection.ErrNotFound) {
		t.Fatalf("started after it expired once: %v, want connection.ErrNotFound", err)
	}
	b := authorization("state-start-in-time")
	if err := st.SaveAuthorization(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got, err := other.StartAuthorization(ctx, b.Start, browserA, b.Expires.Add(-time.Millisecond)); err != nil || !sameAuthorization(got, b) {
		t.Fatalf("started a millisecond before its expiry: %+v, %v", got, err)
	}
}

// testOtherBrowser is the attack a browser-bound consent stops: a consent
// started in browser A whose callback comes from browser B, or from a
// browser with no value, or one never started, is refused and left for
// browser A, which then finishes it.
func testOtherBrowser(t *testing.T, st, other ConnectStore) {
	unstarted := authorization("state-never-started")
	if err := st.SaveAuthorization(ctx, unstarted); err != nil {
		t.Fatal(err)
	}
	a := authorization("state-of-browser-a")
	saveStarted(t, st, a, browserA)
	for _, h := range []ConnectStore{st, other} {
		for _, browser := range []string{browserB, ""} {
			if got, err := h.TakeAuthorization(ctx, a.OAuthState, browser, time.Now()); !errors.Is(err, connection.ErrOtherBrowser) {
				t.Fatalf("browser %q took A's consent: %+v, %v; want connection.ErrOtherBrowser", browser, got, err)
			}
			if got, err := h.TakeAuthorization(ctx, unstarted.OAuthState, browser, time.Now()); !errors.Is(err, connection.ErrOtherBrowser) {
				t.Fatalf("browser %q took a consent never started: %+v, %v; want connection.ErrOtherBrowser", browser, got, err)
			}
		}
	}
	if got, err := other.TakeAuthorization(ctx, a.OAuthState, browserA, time.Now()); err != nil || !sameAuthorization(got, a) {
		t.Fatalf("browser A, after B was refused: %+v, %v", got, err)
	}
	// The consent never started is still there to be started.
	start(t, other, unstarted, browserB)
	if _, err := st.TakeAuthorization(ctx, unstarted.OAuthState, browserB, time.Now()); err != nil {
		t.Fatalf("the consent refused before it was started: %v", err)
	}
}

// testRacingStarters has browsers race on one start link through both
// instances, as a link sent to two people would: one starts the consent,
// and only that browser can finish it.
func testRacingStarters(t *testing.T, st, other ConnectStore) {
	const links, browsers = 10, 8
	for i := range links {
		a := authorization(fmt.Sprintf("state-start-race-%02d", i))
		if err := []ConnectStore{st, other}[i%2].SaveAuthorization(ctx, a); err != nil {
			t.Fatal(err)
		}
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			winner []string
		)
		begin := make(chan struct{})
		for k := range browsers {
			h := []ConnectStore{st, other}[k%2]
			browser := fmt.Sprintf("browser-%d-of-%s", k, a.OAuthState)
			wg.Go(func() {
				<-begin
				got, err := h.StartAuthorization(ctx, a.Start, browser, time.Now())
				switch {
				case err == nil:
					if !sameAuthorization(got, a) {
						t.Errorf("started %+v, saved %+v", got, a)
					}
					mu.Lock()
					winner = append(winner, browser)
					mu.Unlock()
				case !errors.Is(err, connection.ErrNotFound):
					t.Error(err)
				}
			})
		}
		close(begin)
		wg.Wait()
		if len(winner) != 1 {
			t.Fatalf("%s was started by %d of %d browsers", a.Start, len(winner), browsers)
		}
		for k := range browsers {
			if browser := fmt.Sprintf("browser-%d-of-%s", k, a.OAuthState); browser != winner[0] {
				if _, err := st.TakeAuthorization(ctx, a.OAuthState, browser, time.Now()); !errors.Is(err, connection.ErrOtherBrowser) {
					t.Fatalf("a browser that lost the start took the consent: %v", err)
				}
			}
		}
		if _, err := other.TakeAuthorization(ctx, a.OAuthState, winner[0], time.Now()); err != nil {
			t.Fatalf("the browser that started it: %v", err)
		}
	}
}

// testRacingTakers has instances race to finish one consent, as a
// browser's repeated callback or a replayed one reaching two instances
// does: for every state, exactly one taker gets it.
func testRacingTakers(t *testing.T, st, other ConnectStore) {
	const states, takers = 20, 8
	for i := range states {
		a := authorization(fmt.Sprintf("state-race-%02d", i))
		saveStarted(t, []ConnectStore{st, other}[i%2], a, browserA)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners int
		)
		start := make(chan struct{})
		for k := range takers {
			h := []ConnectStore{st, other}[k%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got, err := h.TakeAuthorization(ctx, a.OAuthState, browserA, time.Now())
				switch {
				case err == nil:
					if !sameAuthorization(got, a) {
						t.Errorf("taken %+v, saved %+v", got, a)
					}
					mu.Lock()
					winners++
					mu.Unlock()
				case !errors.Is(err, connection.ErrNotFound):
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if winners != 1 {
			t.Fatalf("%s was taken %d times by %d takers", a.OAuthState, winners, takers)
		}
	}
}

// pollInterval is how often every instance lists every connection to
// follow the others' changes (caddymodule/gateway).
const pollInterval = 500 * time.Millisecond

// BenchmarkListConnections measures the list every instance makes each
// pollInterval, over n connections spread across firms, and reports it as
// a share of the interval: what following connections costs a store.
func BenchmarkListConnections(b *testing.B, st ConnectionStore, n int) {
	for i := range n {
		c := conn(fmt.Sprintf("con_%04d", i), fmt.Sprintf("frm_%02d", i%40), t0.Add(time.Duration(i)*time.Second))
		if _, err := st.CreateConnection(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		list, err := st.Connections(ctx, "")
		if err != nil || len(list) != n {
			b.Fatalf("listed %d of %d: %v", len(list), n, err)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(per)/float64(pollInterval)*100, "%-of-poll")
	b.Logf("%d connections listed in %v, %.3f%% of the %v poll", n, per, float64(per)/float64(pollInterval)*100, pollInterval)
}
