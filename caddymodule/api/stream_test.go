package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sse "github.com/tmaxmax/go-sse"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/credential"
)

// memFeed is an event feed in memory: positions are 1, 2, 3, ... over
// every tenant, as the embedded store numbers them.
type memFeed struct {
	mu      sync.Mutex
	entries []dispatcher.Event
	fail    error
	reads   int
	signal  chan struct{}
	// quiet records without signalling, as another process would.
	quiet bool
	// trimmed is how many of the oldest positions the feed no longer
	// keeps.
	trimmed int
}

func (f *memFeed) Follow(_ context.Context, q dispatcher.FeedQuery) (dispatcher.FeedPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.fail != nil {
		return dispatcher.FeedPage{}, f.fail
	}
	if q.After == "" {
		return dispatcher.FeedPage{Position: strconv.Itoa(len(f.entries))}, nil
	}
	after, err := strconv.Atoi(q.After)
	if err != nil || after > len(f.entries) {
		return dispatcher.FeedPage{}, practice.ErrInvalidCursor
	}
	page := dispatcher.FeedPage{Position: q.After}
	if after < f.trimmed {
		page.Missed, page.Resume, page.Position = true, strconv.Itoa(f.trimmed), strconv.Itoa(f.trimmed)
		after = f.trimmed
	}
	for i := after; i < len(f.entries) && len(page.Entries) < q.Max; i++ {
		page.Position = strconv.Itoa(i + 1)
		if f.entries[i].Tenant() == q.Tenant {
			page.Entries = append(page.Entries, dispatcher.FeedEntry{Position: page.Position, Event: f.entries[i]})
		}
	}
	return page, nil
}

func (f *memFeed) Recorded() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.signal == nil {
		f.signal = make(chan struct{})
	}
	return f.signal
}

func (f *memFeed) record(evs ...dispatcher.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = append(f.entries, evs...)
	if f.signal != nil && !f.quiet {
		close(f.signal)
		f.signal = nil
	}
}

func (f *memFeed) setFail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = err
}

var (
	sandboxTenant = practice.Tenant{Firm: "frm_acme", Sandbox: true}
	liveTenant    = practice.Tenant{Firm: "frm_acme"}
	// credentials by token, as practicegw_auth would put them on the request.
	streamCreds = map[string]*credential.Credential{
		"sandbox":       {ID: "crd_sandbox", Firm: "frm_acme", Sandbox: true, Scopes: []string{"events:read"}},
		"live":          {ID: "crd_live", Firm: "frm_acme", Scopes: []string{"events:read", "webhooks:read"}},
		"live-events":   {ID: "crd_live_events", Firm: "frm_acme", Scopes: []string{"events:read"}},
		"sandbox-hooks": {ID: "crd_hooks", Firm: "frm_acme", Sandbox: true, Scopes: []string{"webhooks:read"}},
	}
)

var eventN int

func newEvent(t practice.Tenant, kind string) dispatcher.Event {
	eventN++
	at := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC).Add(-time.Duration(eventN) * time.Minute)
	return dispatcher.Event{ID: dispatcher.EventID(fmt.Sprint("chg_", eventN), kind, at), Event: kind, OccurredAt: at,
		Firm: t.Firm, Sandbox: t.Sandbox, Data: json.RawMessage(`{"name":"A & B"}`)}
}

// streamServer serves the stream route over a real HTTP server.
func streamServer(t *testing.T, feed eventFeed) (*Handler, *httptest.Server) {
	t.Helper()
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("a key every instance shares")
	pos, err := newPositions(key)
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{logger: zap.NewNop(), metrics: m, tenants: webhooksOnly{}, feed: feed, streams: newStreams(),
		cursors: cursors{key: key}, positions: pos}
	h.streams.poll, h.streams.heartbeat = 10*time.Millisecond, time.Hour
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if c, ok := streamCreds[token]; ok {
			r = r.WithContext(auth.WithCredential(r.Context(), c))
		}
		h.ServeHTTP(w, r, nil)
	}))
	t.Cleanup(func() {
		h.streams.close()
		srv.Close()
	})
	return h, srv
}

// client is one open stream, its messages read into a channel.
type client struct {
	resp   *http.Response
	events chan sse.Event
	cancel context.CancelFunc
}

func openStream(t *testing.T, srv *httptest.Server, token, query, lastID string) *client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/events/stream"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &client{resp: resp, events: make(chan sse.Event, 100), cancel: cancel}
	t.Cleanup(c.close)
	if resp.StatusCode != http.StatusOK {
		return c
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	go func() {
		defer close(c.events)
		for ev, err := range sse.Read(resp.Body, &sse.ReadConfig{MaxEventSize: dispatcher.MaxPayload + 1024}) {
			if err != nil {
				return
			}
			c.events <- ev
		}
	}()
	return c
}

func (c *client) close() {
	c.cancel()
	c.resp.Body.Close()
}

// next returns the next message with data; its LastEventID is its id.
func (c *client) next(t *testing.T) sse.Event {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatal("the stream ended")
			}
			if ev.Data != "" {
				return ev
			}
		case <-timeout:
			t.Fatal("no event within 5s")
		}
	}
}

// opening waits for the opening message and returns the id it sets.
func (c *client) opening(t *testing.T) string {
	t.Helper()
	select {
	case ev := <-c.events:
		if ev.Data != "" || ev.LastEventID == "" {
			t.Fatalf("opening message %+v, want an id and no data", ev)
		}
		return ev.LastEventID
	case <-time.After(5 * time.Second):
		t.Fatal("no opening message within 5s")
	}
	return ""
}

func envelope(t *testing.T, ev dispatcher.Event, name string) string {
	t.Helper()
	b, err := ev.Envelope(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestStreamSendsNewEventsOfTheTenantAsFiltered(t *testing.T) {
	feed := &memFeed{}
	_, srv := streamServer(t, feed)
	before := newEvent(sandboxTenant, dispatcher.JobOpened)
	feed.record(before)

	c := openStream(t, srv, "sandbox", "?events=job.*,engagement_letter.signed", "")
	if c.resp.StatusCode != 200 {
		t.Fatalf("status %d", c.resp.StatusCode)
	}
	c.opening(t)
	opened := newEvent(sandboxTenant, dispatcher.JobOpened)
	feed.record(
		newEvent(liveTenant, dispatcher.JobOpened),        // another mode
		newEvent(sandboxTenant, dispatcher.ClientCreated), // not asked for
		opened, // job.*
		newEvent(practice.Tenant{Firm: "frm_birch", Sandbox: true}, dispatcher.JobClosed), // another firm
	)
	signed := newEvent(sandboxTenant, dispatcher.EngagementSigned)
	feed.record(signed)

	first := c.next(t)
	if first.Data != envelope(t, opened, opened.Event) {
		t.Fatalf("first message %q, want the envelope of %s (and not %s, recorded before the stream opened)", first.Data, opened.ID, before.ID)
	}
	second := c.next(t)
	// Asked for by its alias only, a signing arrives under that name.
	if second.Data != envelope(t, signed, dispatcher.EngagementLetterSign) || second.LastEventID == first.LastEventID {
		t.Fatalf("second message %q (id %q after %q), want %s as engagement_letter.signed with its own id",
			second.Data, second.LastEventID, first.LastEventID, signed.ID)
	}
}

func TestStreamResumesAfterLastEventIDWithoutLossOrRepeat(t *testing.T) {
	feed := &memFeed{}
	_, srv := streamServer(t, feed)
	c := openStream(t, srv, "sandbox", "", "")
	start := c.opening(t)
	a, b := newEvent(sandboxTenant, dispatcher.InvoicePaid), newEvent(sandboxTenant, dispatcher.JobClosed)
	feed.record(a, b)
	if got := c.next(t); !strings.Contains(got.Data, a.ID) {
		t.Fatalf("got %q, want %s", got.Data, a.ID)
	}
	last := c.next(t)
	c.close()

	// Recorded while nobody listens.
	missed := []dispatcher.Event{newEvent(sandboxTenant, dispatcher.ClientUpdated), newEvent(sandboxTenant, dispatcher.JobOpened)}
	feed.record(missed...)
	again := openStream(t, srv, "sandbox", "", last.LastEventID)
	for _, want := range missed {
		if got := again.next(t); got.Data != envelope(t, want, want.Event) {
			t.Fatalf("after resuming: %q, want %s", got.Data, want.ID)
		}
	}
	// From the opening position, nothing was lost before the first event
	// either.
	fromStart := openStream(t, srv, "sandbox", "", start)
	for _, want := range append([]dispatcher.Event{a, b}, missed...) {
		if got := fromStart.next(t); !strings.Contains(got.Data, want.ID) {
			t.Fatalf("resuming from the opening id: %q, want %s", got.Data, want.ID)
		}
	}
}

func TestStreamPollsForEventsOtherProcessesRecord(t *testing.T) {
	// Nothing signals this process: the events are recorded elsewhere.
	feed := &memFeed{quiet: true}
	h, srv := streamServer(t, feed)
	h.streams.poll = 20 * time.Millisecond
	c := openStream(t, srv, "sandbox", "", "")
	c.opening(t)
	ev := newEvent(sandboxTenant, dispatcher.DocumentFiled)
	feed.record(ev)
	if got := c.next(t); !strings.Contains(got.Data, ev.ID) {
		t.Fatalf("got %q", got.Data)
	}
}

func TestStreamWakesWhenThisProcessRecords(t *testing.T) {
	feed := &memFeed{}
	h, srv := streamServer(t, feed)
	h.streams.poll = time.Hour // only the signal can wake it
	c := openStream(t, srv, "sandbox", "", "")
	c.opening(t)
	ev := newEvent(sandboxTenant, dispatcher.InvoiceRaised)
	feed.record(ev)
	if got := c.next(t); !strings.Contains(got.Data, ev.ID) {
		t.Fatalf("got %q", got.Data)
	}
}

func TestStreamWaitsOutAnUnavailableStore(t *testing.T) {
	feed := &memFeed{}
	_, srv := streamServer(t, feed)
	c := openStream(t, srv, "sandbox", "", "")
	c.opening(t)
	feed.setFail(errors.New("redis: connection refused"))
	ev := newEvent(sandboxTenant, dispatcher.JobStageChanged)
	feed.record(ev)
	// The stream keeps reading while the store fails...
	reads := func() int { feed.mu.Lock(); defer feed.mu.Unlock(); return feed.reads }
	n := reads()
	eventually.True(t, 5*time.Second, 5*time.Millisecond, "the stream to go on reading the feed while it fails", func() bool {
		return reads() >= n+3
	})
	// ...and delivers what was recorded meanwhile once it is back.
	feed.setFail(nil)
	if got := c.next(t); !strings.Contains(got.Data, ev.ID) {
		t.Fatalf("got %q", got.Data)
	}
}

func TestStreamHeartbeatsAndEndsOnShutdown(t *testing.T) {
	feed := &memFeed{}
	h, srv := streamServer(t, feed)
	h.streams.heartbeat = 20 * time.Millisecond
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer sandbox")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	beats := 0
	timeout := time.After(5 * time.Second)
	for beats < 2 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended")
			}
			if l == ": keep-alive" {
				beats++
			}
		case <-timeout:
			t.Fatalf("%d heartbeats within 5s, want 2", beats)
		}
	}
	h.streams.close()
	timeout = time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-lines:
			if !ok {
				return // ended
			}
		case <-timeout:
			t.Fatal("the stream is still open 5s after the server began to shut down")
		}
	}
}

func TestStreamRefusals(t *testing.T) {
	feed := &memFeed{}
	_, srv := streamServer(t, feed)
	for _, tc := range []struct {
		name, token, query, lastID string
		status                     int
		code, param                string
	}{
		{"live credential without live=true", "live", "", "", 400, "parameter_missing", "live"},
		{"live credential without webhooks:read", "live-events", "?live=true", "", 403, "insufficient_scope", ""},
		{"sandbox credential asking for live", "sandbox", "?live=true", "", 403, "insufficient_scope", ""},
		{"no events:read", "sandbox-hooks", "", "", 403, "insufficient_scope", ""},
		{"no credential", "", "", "", 401, "unauthenticated", ""},
		{"unknown kind", "sandbox", "?events=job.opened,job.removed", "", 400, "parameter_invalid", "events"},
		{"pattern of no resource", "sandbox", "?events=person.*", "", 400, "parameter_invalid", "events"},
		{"empty events", "sandbox", "?events=", "", 400, "parameter_missing", "events"},
		{"live not a boolean", "live", "?live=yes", "", 400, "parameter_invalid", "live"},
		{"unknown parameter", "sandbox", "?since=now", "", 400, "parameter_unknown", "since"},
		{"forged Last-Event-ID", "sandbox", "", "cur_AAAAAAAAAAAAAAAAAAAAAAAA", 400, "invalid_cursor", "Last-Event-ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openStream(t, srv, tc.token, tc.query, tc.lastID)
			var body struct{ Error struct{ Code, Param string } }
			if err := json.NewDecoder(c.resp.Body).Decode(&body); err != nil || c.resp.StatusCode != tc.status ||
				body.Error.Code != tc.code || body.Error.Param != tc.param {
				t.Fatalf("%d %+v (%v), want %d %s param %q", c.resp.StatusCode, body, err, tc.status, tc.code, tc.param)
			}
		})
	}
	// A live credential with both scopes and live=true streams live events.
	c := openStream(t, srv, "live", "?live=true", "")
	c.opening(t)
	ev := newEvent(liveTenant, dispatcher.InvoicePaid)
	feed.record(newEvent(sandboxTenant, dispatcher.InvoicePaid), ev)
	got := c.next(t)
	if got.Data != envelope(t, ev, ev.Event) {
		t.Fatalf("live stream: %q, want %s", got.Data, ev.ID)
	}
	// Another tenant's position is refused rather than followed: a sealed
	// position names its tenant.
	if other := openStream(t, srv, "sandbox", "", got.LastEventID); other.resp.StatusCode != 400 {
		t.Fatalf("a live stream's id on a sandbox stream: %d", other.resp.StatusCode)
	}
}

func TestStreamsPerCredentialAreBounded(t *testing.T) {
	feed := &memFeed{}
	_, srv := streamServer(t, feed)
	var open []*client
	for range streamsPerCredential {
		c := openStream(t, srv, "sandbox", "", "")
		c.opening(t)
		open = append(open, c)
	}
	extra := openStream(t, srv, "sandbox", "", "")
	if extra.resp.StatusCode != http.StatusTooManyRequests || extra.resp.Header.Get("Retry-After") == "" {
		t.Fatalf("stream %d: %d, want 429 with Retry-After", streamsPerCredential+1, extra.resp.StatusCode)
	}
	// Another credential is not held back by this one's streams.
	if other := openStream(t, srv, "live", "?live=true", ""); other.resp.StatusCode != http.StatusOK {
		t.Fatalf("another credential: %d", other.resp.StatusCode)
	}
	// Closing one frees its slot.
	open[0].close()
	eventually.NoError(t, 5*time.Second, 10*time.Millisecond, "a closed stream's slot to be freed", func() error {
		c := openStream(t, srv, "sandbox", "", "")
		if c.resp.StatusCode == http.StatusOK {
			return nil
		}
		c.close()
		return fmt.Errorf("a new stream is answered %d", c.resp.StatusCode)
	})
}

// The stream follows the order events are recorded in, not their ids: an
// event that occurred an hour ago and is recorded now (a vendor's late
// webhook) still arrives, over a real engine and store.
func TestStreamDeliversAnEventRecordedLate(t *testing.T) {
	_, eng := webhookHandler(t)
	_, srv := streamServer(t, eng)
	c := openStream(t, srv, "sandbox", "", "")
	c.opening(t)
	ctx := context.Background()
	ingest := func(id string, at time.Time) {
		t.Helper()
		err := eng.Ingest(ctx, practice.Change{ID: id, Firm: "frm_acme", Sandbox: true, Kind: practice.Clients,
			ResourceID: "cli_" + id, After: json.RawMessage(`{"id":"cli_` + id + `"}`), OccurredAt: at})
		if err != nil {
			t.Fatal(err)
		}
	}
	ingest("now", time.Now())
	if got := c.next(t); !strings.Contains(got.Data, `"cli_now"`) {
		t.Fatalf("got %q", got.Data)
	}
	ingest("late", time.Now().Add(-time.Hour))
	if got := c.next(t); !strings.Contains(got.Data, `"cli_late"`) {
		t.Fatalf("got %q", got.Data)
	}
}

// noFlush is a writer that cannot flush, as the console explorer's
// capture of an answer is.
type noFlush struct {
	header http.Header
	body   strings.Builder
}

func (w *noFlush) Header() http.Header         { return w.header }
func (w *noFlush) WriteHeader(int)             {}
func (w *noFlush) Write(p []byte) (int, error) { return w.body.Write(p) }

// A writer that cannot stream gets the opening message and the end,
// rather than a request that never returns.
func TestStreamEndsOnAWriterThatCannotFlush(t *testing.T) {
	h, _ := streamServer(t, &memFeed{})
	r := httptest.NewRequest(http.MethodGet, "/v1/events/stream", nil)
	r = r.WithContext(auth.WithCredential(r.Context(), streamCreds["sandbox"]))
	w := &noFlush{header: http.Header{}}
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(w, r, nil)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still open on a writer that cannot flush")
	}
	if !strings.Contains(w.body.String(), ": practicegw events of frm_acme") {
		t.Fatalf("body %q", w.body.String())
	}
}

// registryDouble stands in for the credential registry: a credential can
// be revoked or lose scopes under an open stream. quiet leaves Changed
// unsignalled, as a registry that learns nothing would, so that only the
// stream's own poll finds the change.
type registryDouble struct {
	mu      sync.Mutex
	revoked map[string]bool
	scopes  map[string][]string
	changed chan struct{}
	quiet   bool
}

func newRegistryDouble() *registryDouble {
	return &registryDouble{revoked: map[string]bool{}, scopes: map[string][]string{}, changed: make(chan struct{})}
}

func (r *registryDouble) Standing(c *credential.Credential) (*credential.Credential, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.revoked[c.ID] {
		return nil, auth.ErrRevoked
	}
	if s, ok := r.scopes[c.ID]; ok {
		cp := *c
		cp.Scopes = s
		return &cp, nil
	}
	return c, nil
}

func (r *registryDouble) Changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

func (r *registryDouble) change(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn()
	if !r.quiet {
		close(r.changed)
		r.changed = make(chan struct{})
	}
}

// ended waits for the stream's last message, an error event, and for the
// stream to end after it; it returns the error's code.
func (c *client) ended(t *testing.T, within time.Duration) string {
	t.Helper()
	timeout := time.After(within)
	code := ""
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				if code == "" {
					t.Fatal("the stream ended without an error event")
				}
				return code
			}
			if ev.Type == "error" {
				var body struct {
					Error struct{ Code, Message, RequestID string }
				}
				if err := json.Unmarshal([]byte(ev.Data), &body); err != nil || body.Error.Message == "" {
					t.Fatalf("error event data %q is not the contract's error body: %v", ev.Data, err)
				}
				code = body.Error.Code
			} else if ev.Data != "" {
				t.Fatalf("after the credential stopped standing the stream sent %q", ev.Data)
			}
		case <-timeout:
			t.Fatalf("the stream is still open %s after its credential stopped standing (error %q)", within, code)
		}
	}
}

func TestStreamEndsWhenItsCredentialNoLongerStands(t *testing.T) {
	for _, tc := range []struct {
		name   string
		quiet  bool // the registry does not signal: the poll must find it
		change func(r *registryDouble)
		code   string
	}{
		{"revoked, signalled", false, func(r *registryDouble) { r.revoked["crd_live"] = true }, "credential_revoked"},
		{"revoked, found by the poll", true, func(r *registryDouble) { r.revoked["crd_live"] = true }, "credential_revoked"},
		{"loses webhooks:read", false, func(r *registryDouble) { r.scopes["crd_live"] = []string{"events:read"} }, "insufficient_scope"},
		{"loses events:read", true, func(r *registryDouble) { r.scopes["crd_live"] = []string{"webhooks:read"} }, "insufficient_scope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			feed := &memFeed{}
			h, srv := streamServer(t, feed)
			reg := newRegistryDouble()
			reg.quiet = tc.quiet
			h.standing = reg
			// Only the registry's signal wakes a stream that is not
			// polled; the poll alone finds a change it does not signal.
			h.streams.poll = time.Hour
			if tc.quiet {
				h.streams.poll = 250 * time.Millisecond
			}
			c := openStream(t, srv, "live", "?live=true", "")
			c.opening(t)
			before := newEvent(liveTenant, dispatcher.ClientCreated)
			feed.record(before)
			if got := c.next(t); !strings.Contains(got.Data, before.ID) {
				t.Fatalf("got %q", got.Data)
			}
			reg.change(func() { tc.change(reg) })
			// An event recorded at the same moment never reaches it.
			feed.record(newEvent(liveTenant, dispatcher.ClientCreated))
			if code := c.ended(t, time.Second); code != tc.code {
				t.Fatalf("the stream ended with %q, want %q", code, tc.code)
			}
		})
	}
}

// Ids reveal nothing: an id is encrypted, different each time it is
// given, opens for its own tenant only, and an earlier version's id (a
// position MAC'd in the clear) is refused as a clear 400.
func TestStreamPositionsAreSealed(t *testing.T) {
	feed := &memFeed{}
	h, srv := streamServer(t, feed)
	a := openStream(t, srv, "sandbox", "", "")
	first := a.opening(t)
	b := openStream(t, srv, "sandbox", "", "")
	if second := b.opening(t); second == first {
		t.Fatalf("two ids of one position are equal (%q): they can be compared", first)
	}
	raw := first[strings.LastIndex(first, ":")+1:]
	if strings.Contains(first, "0") && !strings.HasPrefix(first, "pgws1:") || strings.Contains(raw, "MA") {
		t.Fatalf("id %q looks like a readable position", first)
	}
	if _, err := h.positions.open(sandboxTenant, first); err != nil {
		t.Fatalf("the gateway cannot read its own id: %v", err)
	}
	if pos, err := h.positions.open(liveTenant, first); err == nil {
		t.Fatalf("a sandbox id opened for the live tenant as %q", pos)
	}
	earlier := h.cursors.seal(sandboxTenant.String(), "/v1/events/stream", noFilters, "0")
	c := openStream(t, srv, "sandbox", "", earlier)
	var body struct{ Error struct{ Code, Param string } }
	if err := json.NewDecoder(c.resp.Body).Decode(&body); err != nil || c.resp.StatusCode != 400 ||
		body.Error.Code != "invalid_cursor" || body.Error.Param != "Last-Event-ID" {
		t.Fatalf("an earlier version's id: %d %+v (%v), want 400 invalid_cursor", c.resp.StatusCode, body, err)
	}
}

// A Last-Event-ID older than the feed keeps is answered with an
// events_missed message first, whose id is where the stream goes on;
// resuming from that id misses nothing more.
func TestStreamSaysWhenEventsWereMissed(t *testing.T) {
	feed := &memFeed{}
	_, srv := streamServer(t, feed)
	c := openStream(t, srv, "sandbox", "", "")
	start := c.opening(t)
	c.close()
	var evs []dispatcher.Event
	for range 5 {
		evs = append(evs, newEvent(sandboxTenant, dispatcher.JobOpened))
	}
	feed.record(evs...)
	feed.mu.Lock()
	feed.trimmed = 3
	feed.mu.Unlock()

	// Resuming, the opening message repeats the id resumed from, so the
	// client sees no message for it.
	again := openStream(t, srv, "sandbox", "", start)
	missed := again.next(t)
	if missed.Type != "events_missed" || missed.LastEventID == "" || missed.LastEventID == start {
		t.Fatalf("first message %+v, want events_missed with a new id", missed)
	}
	var body struct {
		Code, Message string
		ResumeFrom    string `json:"resume_from"`
	}
	if err := json.Unmarshal([]byte(missed.Data), &body); err != nil || body.Code != "events_expired" || body.ResumeFrom == "" || body.Message == "" {
		t.Fatalf("events_missed data %q: %+v, %v", missed.Data, body, err)
	}
	for _, want := range evs[3:] {
		if got := again.next(t); got.Type != "" || got.Data != envelope(t, want, want.Event) {
			t.Fatalf("after the notice: %+v, want %s", got, want.ID)
		}
	}
	for _, from := range []string{missed.LastEventID, body.ResumeFrom} {
		resumed := openStream(t, srv, "sandbox", "", from)
		if got := resumed.next(t); got.Type != "" || !strings.Contains(got.Data, evs[3].ID) {
			t.Fatalf("resuming from the notice's position: %+v, want %s and no second notice", got, evs[3].ID)
		}
	}
}
