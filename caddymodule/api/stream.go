package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	sse "github.com/tmaxmax/go-sse"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/apierror"
)

// GET /v1/events/stream: the credential's firm's new events as
// Server-Sent Events, for practicegw listen and anything else that wants
// events on a machine with no public URL. Nothing is registered: the
// stream is the subscription, and it ends with the connection.
//
// It follows the event feed (dispatcher.EventFeed), which every instance
// shares, so events recorded by any gateway or dispatcher arrive, and each
// event's SSE id is its feed position, sealed like a paging cursor: a
// client that reconnects with Last-Event-ID, through any instance,
// resumes after it without loss or repeat. The feed is polled every
// streamPoll, and read at once when this process's engine records an
// event.

var streamParams = []param{
	{name: "events", typ: "string",
		desc: "Comma-separated event kinds or patterns to receive: a kind, engagement_letter.signed, a resource's kinds such as job.*, or * (the default)."},
	{name: "live", typ: "boolean",
		desc: "true to stream a live credential's events, which carry client data; a live credential must send it and also hold webhooks:read. A sandbox credential streams sandbox events only."},
}

// streamNote describes the stream in the OpenAPI document.
const streamNote = "A live credential also needs `webhooks:read` and `live=true`. " +
	"Each event is one Server-Sent Events message whose data is the event envelope exactly as a webhook delivers it; " +
	"its id is an opaque position: reconnect with Last-Event-ID, through any gateway instance, to resume after it without loss or repeat. " +
	"The stream starts at the time of connecting, sends a comment every 15 seconds while idle, and registers nothing. " +
	"A credential may hold 5 streams open on each gateway instance; past that it is answered 429."

// eventFeed is the engine's event feed, as the stream reads it.
type eventFeed interface {
	Follow(ctx context.Context, q dispatcher.FeedQuery) (dispatcher.FeedPage, error)
	// Recorded is closed when this process's engine next records an event.
	Recorded() <-chan struct{}
}

// Stream settings.
const (
	// streamsPerCredential bounds one credential's open streams on one
	// instance: each holds a connection and polls the store.
	streamsPerCredential = 5
	// streamBatch bounds the events one read of the feed holds in memory.
	streamBatch = 32
	// streamWriteTimeout bounds one write to the client, so that a client
	// that stopped reading cannot hold a stream open; it replaces any
	// write_timeout of the server, which would cut every stream short.
	streamWriteTimeout = 30 * time.Second
	// streamRetry is the reconnection delay the stream suggests.
	streamRetry = time.Second
)

// streams tracks a handler's open streams: how many each credential holds,
// and the signal that ends them all when the server shuts down.
type streams struct {
	poll      time.Duration // how often the feed is read when nothing wakes the stream
	heartbeat time.Duration // how often an idle stream sends a comment, for proxies

	mu      sync.Mutex
	open    map[string]int
	closing chan struct{}
	once    sync.Once
}

func newStreams() *streams {
	return &streams{poll: 250 * time.Millisecond, heartbeat: 15 * time.Second,
		open: map[string]int{}, closing: make(chan struct{})}
}

// acquire takes one of the credential's stream slots; release gives it
// back.
func (s *streams) acquire(credential string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[credential] >= streamsPerCredential {
		return nil, false
	}
	s.open[credential]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.open[credential]--; s.open[credential] <= 0 {
			delete(s.open, credential)
		}
	}, true
}

// close ends every stream: the server is shutting down (a reload or
// exit), which would otherwise wait for them for ever. Their clients
// reconnect, with Last-Event-ID, to whatever serves next.
func (s *streams) close() { s.once.Do(func() { close(s.closing) }) }

func (h *Handler) streamEvents(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := parseQuery(c.route, r.URL.RawQuery)
	if err != nil {
		return err
	}
	live := q.params["live"] == "true"
	switch {
	case c.tenant.Sandbox && live:
		return apierror.New(http.StatusForbidden, "insufficient_scope",
			"A sandbox credential streams sandbox events only; send a live credential (pgw_live_...) with live=true for live ones.")
	case !c.tenant.Sandbox && !live:
		return apierror.New(http.StatusBadRequest, "parameter_missing",
			"This is a live credential, whose events carry client data: send live=true (practicegw listen --live) to stream them.").WithParam("live")
	case !c.tenant.Sandbox && !c.cred.Allows("webhooks:read"):
		return apierror.New(http.StatusForbidden, "insufficient_scope",
			"Streaming live events needs the webhooks:read scope as well as events:read.")
	}
	filter := dispatcher.KindFilter{dispatcher.AllEvents}
	if v, ok := q.params["events"]; ok {
		if filter, err = dispatcher.ParseKindFilter(splitComma(v)); err != nil {
			return err
		}
	}
	pos := ""
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		if pos, err = h.cursors.open(c.tenant.String(), c.route.pattern, noFilters, last); err != nil {
			return apierror.New(http.StatusBadRequest, "invalid_cursor",
				"Last-Event-ID is not an id this stream sent; reconnect without it to start from now.").WithParam("Last-Event-ID")
		}
	}
	release, ok := h.streams.acquire(c.cred.ID)
	if !ok {
		return apierror.New(http.StatusTooManyRequests, "rate_limited",
			fmt.Sprintf("This credential has %d event streams open on this gateway, the most it may; close one first.", streamsPerCredential)).
			WithHeader("Retry-After", "5")
	}
	defer release()
	// The first read comes before the answer, so that a bad position or an
	// unavailable store is an error status rather than a stream that ends.
	// The wake-up is asked for before it, so that an event recorded while
	// it is out wakes the stream.
	wake := h.feed.Recorded()
	page, err := h.feed.Follow(r.Context(), dispatcher.FeedQuery{Tenant: c.tenant, After: pos, Max: streamBatch})
	if err != nil {
		if errors.Is(err, dispatcher.ErrInvalidCursor) {
			return apierror.New(http.StatusBadRequest, "invalid_cursor",
				"Last-Event-ID names a position this gateway's event log does not hold; reconnect without it to start from now.").WithParam("Last-Event-ID")
		}
		return err
	}
	s := &stream{h: h, w: w, rc: http.NewResponseController(w), c: c, filter: filter, announced: pos}
	// The connection may serve another request after the stream: it must
	// not keep the stream's last deadline.
	defer s.rc.SetWriteDeadline(time.Time{})
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	// Proxies that buffer responses (nginx) pass this one through as it is
	// written.
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if pos == "" {
		pos = page.Position
	}
	// The opening frame names where the stream starts: a client that loses
	// the connection before any event resumes from here.
	open := &sse.Message{Retry: streamRetry}
	open.AppendComment(fmt.Sprintf("practicegw events of %s", c.tenant))
	if err := s.send(open, pos); err != nil {
		return nil
	}
	s.follow(r.Context(), page, pos, wake)
	return nil
}

// stream is one open event stream.
type stream struct {
	h      *Handler
	w      http.ResponseWriter
	rc     *http.ResponseController
	c      *call
	filter dispatcher.KindFilter
	// announced is the last position the client was sent.
	announced string
}

// follow sends the feed from page on until the client goes, the request
// is cancelled or the server shuts down.
func (s *stream) follow(ctx context.Context, page dispatcher.FeedPage, pos string, wake <-chan struct{}) {
	poll := time.NewTicker(s.h.streams.poll)
	defer poll.Stop()
	beat := time.NewTicker(s.h.streams.heartbeat)
	defer beat.Stop()
	failing := false
	for {
		if err := s.deliver(page.Entries); err != nil {
			return
		}
		if len(page.Entries) > 0 {
			if err := s.rc.Flush(); err != nil {
				return
			}
		}
		moved := page.Position != pos
		pos = page.Position
		if !moved {
			select {
			case <-ctx.Done():
				return
			case <-s.h.streams.closing:
				return
			case <-wake:
			case <-poll.C:
			case <-beat.C:
				// A comment keeps proxies from closing an idle connection;
				// the position skipped events reached rides along.
				m := &sse.Message{}
				m.AppendComment("keep-alive")
				if err := s.send(m, pos); err != nil {
					return
				}
			}
		}
		// Asked before the read, so that an event recorded during it
		// wakes the next one.
		wake = s.h.feed.Recorded()
		next, err := s.h.feed.Follow(ctx, dispatcher.FeedQuery{Tenant: s.c.tenant, After: pos, Max: streamBatch})
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// The store is unavailable: the stream waits for it, losing
			// nothing, and says so once.
			if !failing {
				s.h.logger.Warn("event stream cannot read the event feed", zap.String("tenant", s.c.tenant.String()), zap.Error(err))
			}
			failing, next = true, dispatcher.FeedPage{Position: pos}
		default:
			failing = false
		}
		page = next
	}
}

// deliver sends the entries the filter keeps, each under its delivery name
// with its position as its id.
func (s *stream) deliver(entries []dispatcher.FeedEntry) error {
	for _, e := range entries {
		name, ok := s.filter.DeliveryName(e.Event.Event)
		if !ok {
			continue
		}
		body, err := e.Event.Envelope(name)
		if err != nil {
			s.h.logger.Error("event stream cannot encode an event", zap.String("event_id", e.Event.ID), zap.Error(err))
			continue
		}
		m := &sse.Message{}
		m.AppendData(string(body))
		if err := s.write(m, e.Position); err != nil {
			return err
		}
	}
	return nil
}

// send writes m, with pos as its id if the client has not been sent it,
// and flushes.
func (s *stream) send(m *sse.Message, pos string) error {
	if err := s.write(m, pos); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *stream) write(m *sse.Message, pos string) error {
	if pos != s.announced {
		m.ID = sse.ID(s.h.cursors.seal(s.c.tenant.String(), s.c.route.pattern, noFilters, pos))
		s.announced = pos
	}
	// Not every writer can time out (a test recorder); those that cannot
	// are not held by a stuck client either.
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	_, err := m.WriteTo(s.w)
	return err
}

// splitComma splits a comma-separated parameter, dropping empty items.
func splitComma(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
