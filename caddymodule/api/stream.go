package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	sse "github.com/tmaxmax/go-sse"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/credential"
)

// GET /v1/events/stream: the credential's firm's new events as
// Server-Sent Events, for practicegw listen and anything else that wants
// events on a machine with no public URL. Nothing is registered: the
// stream is the subscription, and it ends with the connection.
//
// It follows the event feed (dispatcher.EventFeed), which every instance
// shares, so events recorded by any gateway or dispatcher arrive, and each
// event's SSE id is its feed position, encrypted (positions): a client
// that reconnects with Last-Event-ID, through any instance, resumes after
// it without loss or repeat, and learns nothing from it. The feed is
// polled every streamPoll, and read at once when this process's engine
// records an event.
//
// A stream holds its credential for as long as it lasts, so it asks the
// credential registry again at every poll and whenever the registry learns
// of a revocation (on any instance, through the store's revocation feed):
// a revoked credential, or one that no longer holds the scopes the stream
// needs, ends it within a second, with a last `event: error` saying why.
//
// A position older than the feed keeps (dispatcher.FeedLength of the
// firm's events) is never skipped over in silence: the stream first sends
// `event: events_missed`, whose id is the position it goes on from.

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
	"A Last-Event-ID older than the 10,000 most recent events of the firm, which are kept, gets a first `event: events_missed` message whose id is the position the stream goes on from; " +
	"a Last-Event-ID this gateway did not send (or that an earlier version sent) is a 400 invalid_cursor. " +
	"If the credential is revoked, or no longer holds the scopes the stream needs, the stream ends within a second with an `event: error` message whose data is the error body (credential_revoked or insufficient_scope). " +
	"A credential may hold 5 streams open on each gateway instance; past that it is answered 429."

// credentialStanding is the credential registry, as a stream asks it
// whether its credential still stands.
type credentialStanding interface {
	// Standing returns the credential as it stands now, or an error once
	// it is revoked.
	Standing(c *credential.Credential) (*credential.Credential, error)
	// Changed is closed when the registry next learns of a revocation.
	Changed() <-chan struct{}
}

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
		if pos, err = h.positions.open(c.tenant, last); err != nil {
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
	// The wake-ups are asked for before it, so that an event recorded, or
	// a revocation learnt, while it is out wakes the stream.
	wake, changed := h.feed.Recorded(), h.credentialsChanged()
	page, err := h.feed.Follow(r.Context(), dispatcher.FeedQuery{Tenant: c.tenant, After: pos, Max: streamBatch})
	if err != nil {
		if errors.Is(err, practice.ErrInvalidCursor) {
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
	s.follow(r.Context(), page, pos, wake, changed)
	return nil
}

// credentialsChanged is closed when the registry next learns of a
// revocation; nil (never) without a registry.
func (h *Handler) credentialsChanged() <-chan struct{} {
	if h.standing == nil {
		return nil
	}
	return h.standing.Changed()
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
// is cancelled, the server shuts down or the credential no longer stands.
func (s *stream) follow(ctx context.Context, page dispatcher.FeedPage, pos string, wake, changed <-chan struct{}) {
	poll := time.NewTicker(s.h.streams.poll)
	defer poll.Stop()
	beat := time.NewTicker(s.h.streams.heartbeat)
	defer beat.Stop()
	failing := false
	for {
		// Asked before anything is sent: nothing reaches the client once
		// the registry knows the credential no longer stands.
		if err := s.stands(); err != nil {
			s.end(err)
			return
		}
		if err := s.deliver(page); err != nil {
			return
		}
		if len(page.Entries) > 0 || page.Missed {
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
			case <-changed:
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
		// Asked before the read, so that an event recorded (or a
		// revocation learnt) during it wakes the next one.
		wake, changed = s.h.feed.Recorded(), s.h.credentialsChanged()
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

// stands asks the registry whether the stream's credential still stands
// and still holds what the stream needs.
func (s *stream) stands() *apierror.Error {
	if s.h.standing == nil {
		return nil
	}
	c, err := s.h.standing.Standing(s.c.cred)
	switch {
	case errors.Is(err, auth.ErrNotSynced):
		// Not read yet (the stream started on a credential the store
		// vouched for): asked again at the next poll.
		return nil
	case err != nil:
		// Standing reads no store: an error is a credential the registry
		// no longer vouches for (auth.ErrRevoked).
		return errStreamRevoked
	case !c.Allows("events:read"), !s.c.tenant.Sandbox && !c.Allows("webhooks:read"):
		return errStreamScope
	}
	return nil
}

var (
	errStreamRevoked = apierror.New(http.StatusUnauthorized, "credential_revoked",
		"This credential was revoked, so its event stream ends; stream with a credential that stands.")
	errStreamScope = apierror.New(http.StatusForbidden, "insufficient_scope",
		"This credential no longer holds the scopes the stream needs (events:read, and webhooks:read for live events), so its event stream ends.")
)

// end sends why the stream ends as its last message: an error event whose
// data is the contract's error body.
func (s *stream) end(e *apierror.Error) {
	s.h.logger.Info("event stream ended: its credential no longer stands",
		zap.String("credential", s.c.cred.ID), zap.String("code", e.Code))
	m := &sse.Message{Type: sse.Type("error")}
	m.AppendData(strings.TrimSpace(string(apierror.Marshal(s.w, e))))
	_ = s.send(m, s.announced)
}

// deliver sends the page: first, if events were missed before it, a
// message saying so whose id is the position it goes on from, then the
// entries the filter keeps, each under its delivery name with its
// position as its id.
func (s *stream) deliver(page dispatcher.FeedPage) error {
	if page.Missed {
		if err := s.missed(page.Resume); err != nil {
			return err
		}
	}
	for _, e := range page.Entries {
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

// missed tells the client that events after its position are gone from
// the feed, and that the stream goes on from resume.
func (s *stream) missed(resume string) error {
	id := s.h.positions.seal(s.c.tenant, resume)
	body, err := json.Marshal(eventsMissed{
		Code: "events_expired",
		Message: fmt.Sprintf("Events recorded after the position this stream resumed from are no longer kept (the feed keeps the firm's last %d), "+
			"so the stream goes on from the oldest kept; list GET /v1/events to fill the gap.", dispatcher.FeedLength),
		ResumeFrom: id,
	})
	if err != nil {
		return err
	}
	m := &sse.Message{Type: sse.Type("events_missed"), ID: sse.ID(id)}
	m.AppendData(string(body))
	s.announced = resume
	return s.write(m, resume)
}

// eventsMissed is the data of an events_missed message.
type eventsMissed struct {
	Code       string `json:"code"`
	Message    string `json:"message"`
	ResumeFrom string `json:"resume_from"`
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
		m.ID = sse.ID(s.h.positions.seal(s.c.tenant, pos))
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
