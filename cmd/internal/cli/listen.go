package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	sse "github.com/tmaxmax/go-sse"

	"github.com/practicegw/practicegw/dispatcher"
	listenaddr "github.com/practicegw/practicegw/internal/listen"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "listen",
		Usage: "--forward-to URL [--events LIST] [--url URL] [--token TOKEN] [--live]",
		Short: "Forwards the firm's events to a local URL, signed, with no public URL and nothing registered",
		Long: `
Receives the firm's sandbox events (or live ones, with --live and a
credential holding events:read and webhooks:read) on this machine: it opens
an outbound, authenticated stream to the gateway (GET /v1/events/stream) and
POSTs each event to --forward-to exactly as a webhook delivery would arrive,
signed with Standard Webhooks headers under a session secret it prints
first. One line per delivery tells the time, the event, its id and the local
answer's status and duration.

Once connected, it reconnects on its own, through whichever gateway instance
answers, and resumes after the last event it received (a gateway that is not
there at all when it starts ends it, naming the address tried); if the gateway no longer keeps
events that far back, it says that events may be missing and goes on. A
receiver that is slow or down does not hold the stream back: events beyond
a queue of 100 are dropped, and said so. Nothing is registered with the
gateway; Ctrl-C stops it. If the credential is revoked, or loses a scope
the stream needs, the gateway ends the stream and listen stops with an
error instead of reconnecting.

  PRACTICEGW_TOKEN=pgw_test_... practicegw listen --forward-to http://localhost:3000/hooks
  practicegw listen --forward-to http://localhost:3000/hooks --events 'job.*,invoice.paid'
  practicegw listen --forward-to http://localhost:3000/hooks --url https://gateway.example --token pgw_live_... --live
`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Args = noArgs
			f := cmd.Flags()
			f.String("forward-to", "", "the local URL each event is POSTed to, such as http://localhost:3000/hooks")
			f.String("events", "", "comma-separated event kinds or patterns, such as job.*,invoice.paid (default: all)")
			f.String("url", "", "the gateway's base URL (default: where PRACTICEGW_LISTEN puts it on this machine, http://localhost:8080 unset)")
			f.String("token", "", "the credential's token (default $PRACTICEGW_TOKEN)")
			f.Bool("live", false, "receive a live credential's events, which carry client data")
			cmd.RunE = func(cmd *cobra.Command, _ []string) error {
				l, err := newListener(cmd)
				if err != nil {
					return err
				}
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return l.run(ctx)
			}
		},
	})
}

// listener is one practicegw listen session.
type listener struct {
	stream    string // the stream's URL, with its parameters
	token     string
	forwardTo string
	secret    string
	out       io.Writer
	// streamClient has no overall timeout: a stream lasts; idle bounds the
	// silence it accepts from the gateway, whose heartbeats come every 15 s.
	streamClient *http.Client
	idle         time.Duration
	// forwardClient bounds each local delivery as the gateway bounds an
	// attempt.
	forwardClient *http.Client
	queue         int

	mu sync.Mutex // serializes lines on out
}

// listenQueue is how many events may wait for a slow receiver.
const listenQueue = 100

func newListener(cmd *cobra.Command) (*listener, error) {
	f := cmd.Flags()
	forwardTo, _ := f.GetString("forward-to")
	events, _ := f.GetString("events")
	base, _ := f.GetString("url")
	token, _ := f.GetString("token")
	live, _ := f.GetBool("live")
	if token == "" {
		token = os.Getenv("PRACTICEGW_TOKEN")
	}
	if token == "" {
		return nil, errors.New("--token or PRACTICEGW_TOKEN is required: a credential with events:read")
	}
	if u, err := url.Parse(forwardTo); forwardTo == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("--forward-to must be an http or https URL, such as http://localhost:3000/hooks")
	}
	if base == "" {
		var err error
		if base, err = listenaddr.URL(os.Getenv(listenaddr.Var)); err != nil {
			return nil, fmt.Errorf("--url is not given and %w", err)
		}
	}
	gw, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (gw.Scheme != "http" && gw.Scheme != "https") || gw.Host == "" {
		return nil, fmt.Errorf("--url %q must be the gateway's http or https base URL", base)
	}
	q := url.Values{}
	if events != "" {
		q.Set("events", events)
	}
	if live {
		q.Set("live", "true")
	}
	gw.Path += "/v1/events/stream"
	gw.RawQuery = q.Encode()
	secret, err := dispatcher.NewSigningSecret()
	if err != nil {
		return nil, err
	}
	return &listener{
		stream: gw.String(), token: token, forwardTo: forwardTo, secret: secret, out: cmd.OutOrStdout(),
		streamClient: &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
		}},
		idle: 45 * time.Second,
		forwardClient: &http.Client{Timeout: 15 * time.Second,
			// A delivery does not follow redirects; neither does this.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		queue: listenQueue,
	}, nil
}

func (l *listener) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, format, args...)
}

// run forwards events until ctx ends (Ctrl-C) or the gateway refuses the
// stream for good.
func (l *listener) run(ctx context.Context) error {
	l.printf("Session signing secret: %s\n", l.secret)
	l.printf("Forwarding events from %s to %s (Ctrl-C to stop)\n", l.stream, l.forwardTo)
	queue := make(chan []byte, l.queue)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.forward(ctx, queue)
	}()
	err := l.follow(ctx, queue)
	close(queue)
	wg.Wait()
	if err != nil {
		return err
	}
	l.printf("Stopped; nothing was registered with the gateway.\n")
	return nil
}

// refusal is the gateway's answer that retrying cannot change: a refused
// connection (status), or an open stream ended with an error event
// (status 0).
type refusal struct {
	status        int
	code, message string
}

func (r *refusal) Error() string {
	if r.status == 0 {
		return fmt.Sprintf("the gateway ended the stream (%s): %s", r.code, r.message)
	}
	return fmt.Sprintf("the gateway refused the stream (%d): %s", r.status, r.message)
}

// follow holds the stream open, reconnecting with back-off and resuming
// after the last position received, and queues each event.
func (l *listener) follow(ctx context.Context, queue chan<- []byte) error {
	const first, most = 500 * time.Millisecond, 15 * time.Second
	lastID, connected, wait := "", false, first
	for {
		ok, err := l.connect(ctx, &lastID, queue, connected)
		if ctx.Err() != nil {
			return nil
		}
		var refused *refusal
		switch {
		case errors.As(err, &refused) && refused.code == "invalid_cursor" && lastID != "":
			// The gateway no longer knows where this session was (its
			// store was replaced, say): go on from now, and say so.
			l.printf("%s  %s; continuing from now, so events recorded meanwhile may be missing\n", now(), refused.message)
			lastID = ""
			continue
		case errors.As(err, &refused):
			return err
		case !connected && errors.As(err, new(*notThere)):
			// Never reached: a mistyped --url or a gateway not started,
			// which waiting would not mend.
			return fmt.Errorf("%w: start one with `practicegw run`, or give yours with --url, such as --url http://localhost:8080", err)
		}
		if ok {
			connected, wait = true, first
		}
		// Jitter keeps many listeners dropped at once (a gateway restart)
		// from reconnecting at once.
		delay := wait/2 + rand.N(wait/2+1)
		l.printf("%s  stream lost: %v; reconnecting in %s\n", now(), err, delay.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		wait = min(wait*2, most)
	}
}

// connect opens the stream once and reads it until it ends. ok says that
// the gateway accepted it.
func (l *listener) connect(ctx context.Context, lastID *string, queue chan<- []byte, reconnect bool) (ok bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.stream, nil)
	if err != nil {
		return false, &refusal{message: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", "practicegw-listen")
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	resp, err := l.streamClient.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			return false, &notThere{gateway: req.URL.Scheme + "://" + req.URL.Host}
		}
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, answerError(resp)
	}
	if reconnect {
		l.printf("%s  reconnected; resuming after the last event received\n", now())
	} else {
		l.printf("%s  connected; waiting for events\n", now())
	}
	// A connection that went silent (no heartbeat) is dropped and made
	// again, rather than waited on for ever.
	errIdle := fmt.Errorf("no word from the gateway for %s", l.idle)
	watchdog := time.AfterFunc(l.idle, func() { cancel(errIdle) })
	defer watchdog.Stop()
	body := &activity{r: resp.Body, seen: func() { watchdog.Reset(l.idle) }}
	dropped := 0
	for ev, err := range sse.Read(body, &sse.ReadConfig{MaxEventSize: 2 * dispatcher.MaxPayload}) {
		if err != nil {
			if cause := context.Cause(ctx); cause != nil {
				return true, cause
			}
			return true, err
		}
		if ev.LastEventID != "" {
			*lastID = ev.LastEventID
		}
		switch ev.Type {
		case "error":
			// The credential no longer stands: reconnecting would be
			// refused too.
			return true, streamError(ev.Data)
		case "events_missed":
			l.printf("%s  the gateway no longer keeps every event since the last one received; continuing from the oldest it keeps, "+
				"so events recorded meanwhile may be missing (GET /v1/events lists them)\n", now())
			continue
		}
		if ev.Data == "" {
			continue
		}
		select {
		case queue <- []byte(ev.Data):
		default:
			dropped++
			var env envelopeHead
			_ = json.Unmarshal([]byte(ev.Data), &env)
			l.printf("%s  %-24s %s  dropped: %s is not keeping up (%d dropped on this connection)\n",
				now(), env.Event, env.ID, l.forwardTo, dropped)
		}
	}
	if cause := context.Cause(ctx); cause != nil {
		return true, cause
	}
	return true, errors.New("the gateway closed the stream")
}

// notThere is a gateway that gave no answer at all: nothing listens at its
// address, or its name does not resolve.
type notThere struct{ gateway string }

func (e *notThere) Error() string { return "no gateway answers at " + e.gateway }

// answerError reads a refusal's JSON error body. 429 and 5xx may pass;
// anything else is for good.
func answerError(resp *http.Response) error {
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &body) == nil && body.Error.Message != "" {
		msg = body.Error.Message
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		return fmt.Errorf("%d: %s", resp.StatusCode, msg)
	}
	return &refusal{status: resp.StatusCode, code: body.Error.Code, message: msg}
}

// streamError reads the error event that ends a stream, whose data is the
// contract's error body.
func streamError(data string) error {
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal([]byte(data), &body) != nil || body.Error.Message == "" {
		return &refusal{code: "unknown", message: strings.TrimSpace(data)}
	}
	return &refusal{code: body.Error.Code, message: body.Error.Message}
}

// activity calls seen whenever bytes arrive.
type activity struct {
	r    io.Reader
	seen func()
}

func (a *activity) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.seen()
	}
	return n, err
}

// envelopeHead is what a delivery line shows of an event.
type envelopeHead struct {
	ID    string `json:"id"`
	Event string `json:"event"`
}

// forward POSTs each queued event to the local URL, one at a time so that
// they arrive in order, and prints a line for each.
func (l *listener) forward(ctx context.Context, queue <-chan []byte) {
	for {
		select {
		case <-ctx.Done():
			return
		case body, ok := <-queue:
			if !ok {
				return
			}
			l.deliver(ctx, body)
		}
	}
}

func (l *listener) deliver(ctx context.Context, body []byte) {
	var env envelopeHead
	if err := json.Unmarshal(body, &env); err != nil || env.ID == "" {
		l.printf("%s  the gateway sent something that is not an event: %.80s\n", now(), body)
		return
	}
	at := time.Now()
	line := func(result string) {
		l.printf("%s  %-24s %s  %s  %s\n", now(), env.Event, env.ID, result, time.Since(at).Round(time.Millisecond))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.forwardTo, bytes.NewReader(body))
	if err != nil {
		line("error: " + err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "practicegw-listen")
	if err := dispatcher.SignHeaders(req.Header, []string{l.secret}, env.ID, at, body); err != nil {
		line("error: " + err.Error())
		return
	}
	resp, err := l.forwardClient.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			line("error: " + err.Error())
		}
		return
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	line(resp.Status)
}

func now() string { return time.Now().Format("2006-01-02 15:04:05") }
