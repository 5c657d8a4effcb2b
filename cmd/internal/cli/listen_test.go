package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// lines is output written from several goroutines.
type lines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lines) waitFor(t *testing.T, s string) {
	t.Helper()
	eventually.NoError(t, 5*time.Second, 5*time.Millisecond, fmt.Sprintf("%q", s), func() error {
		if out := l.String(); !strings.Contains(out, s) {
			return fmt.Errorf("the output is:\n%s", out)
		}
		return nil
	})
}

// A receiver that does not answer holds one event; a bounded queue holds a
// few more; the rest are dropped and said so, and the stream is read on
// regardless.
func TestListenDropsWhatASlowReceiverCannotTake(t *testing.T) {
	const events = 10
	arrived, release := make(chan struct{}, events), make(chan struct{})
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 0\n: opening\n\n")
		for i := 1; i <= events; i++ {
			fmt.Fprintf(w, "id: %d\ndata: {\"id\":\"evt_%d\",\"event\":\"job.opened\"}\n\n", i, i)
			w.(http.Flusher).Flush()
			if i == 1 {
				select { // the first is at the receiver before the rest come
				case <-arrived:
				case <-r.Context().Done():
				}
			}
		}
		<-r.Context().Done()
	}))
	defer gateway.Close()
	var mu sync.Mutex
	var got []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so that the server notices a client gone
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		mu.Lock()
		got = append(got, r.Header.Get("webhook-id"))
		mu.Unlock()
	}))
	defer receiver.Close()

	out := &lines{}
	l := &listener{stream: gateway.URL, token: "pgw_test_x", forwardTo: receiver.URL, secret: "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2U=",
		out: out, streamClient: http.DefaultClient, idle: time.Minute, forwardClient: http.DefaultClient, queue: 2}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before the servers close, on failure too
	done := make(chan error, 1)
	go func() { done <- l.run(ctx) }()

	// One at the receiver, two queued, seven dropped.
	out.waitFor(t, "evt_10  dropped: "+receiver.URL+" is not keeping up (7 dropped on this connection)")
	close(release)
	out.waitFor(t, "evt_3  200 OK")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("listen did not stop within 5s of its context")
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != "[evt_1 evt_2 evt_3]" {
		t.Fatalf("forwarded %v, want evt_1 to evt_3 in order", got)
	}
	if !strings.Contains(out.String(), "nothing was registered") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// A position the gateway no longer knows (its store replaced, instances
// that do not share a cursor key) is given up, said so, and the stream
// goes on from now, rather than the command ending.
func TestListenGoesOnFromNowWhenThePositionIsUnknown(t *testing.T) {
	var mu sync.Mutex
	var seen []string // Last-Event-ID of each connection
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Last-Event-ID"))
		n := len(seen)
		mu.Unlock()
		switch n {
		case 1:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: p1\ndata: {\"id\":\"evt_1\",\"event\":\"job.opened\"}\n\n")
		case 2:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"code":"invalid_cursor","message":"Last-Event-ID names a position this gateway's event log does not hold"}}`)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: q1\ndata: {\"id\":\"evt_2\",\"event\":\"job.opened\"}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	defer gateway.Close()
	receiver := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer receiver.Close()
	out := &lines{}
	l := &listener{stream: gateway.URL, token: "pgw_test_x", forwardTo: receiver.URL, secret: "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2U=",
		out: out, streamClient: http.DefaultClient, idle: time.Minute, forwardClient: http.DefaultClient, queue: 2}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.run(ctx) }()
	out.waitFor(t, "evt_2  200 OK")
	if !strings.Contains(out.String(), "continuing from now") {
		t.Fatalf("output:\n%s", out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seen[:3]) != "[ p1 ]" {
		t.Fatalf("connections sent Last-Event-ID %q, want none, p1, none", seen)
	}
}

// listenTo runs listen against a gateway double until it returns.
func listenTo(t *testing.T, gateway http.Handler) (*lines, error) {
	t.Helper()
	gw := httptest.NewServer(gateway)
	defer gw.Close()
	receiver := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer receiver.Close()
	out := &lines{}
	l := &listener{stream: gw.URL, token: "pgw_live_x", forwardTo: receiver.URL, secret: "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2U=",
		out: out, streamClient: http.DefaultClient, idle: time.Minute, forwardClient: http.DefaultClient, queue: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := l.run(ctx)
	if ctx.Err() != nil {
		t.Fatalf("listen was still running after 5s:\n%s", out.String())
	}
	return out, err
}

// A stream the gateway ends because the credential no longer stands stops
// listen with the gateway's reason and an error (a non-zero exit), rather
// than a reconnection.
func TestListenStopsWhenTheGatewayEndsTheStream(t *testing.T) {
	var connections atomic.Int32
	out, err := listenTo(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		connections.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: p1\ndata: {\"id\":\"evt_1\",\"event\":\"client.created\"}\n\n")
		fmt.Fprint(w, "event: error\ndata: {\"error\":{\"code\":\"credential_revoked\",\"message\":\"This credential was revoked, so its event stream ends.\",\"request_id\":\"req_1\"}}\n\n")
	}))
	var refused *refusal
	if !errors.As(err, &refused) || refused.code != "credential_revoked" || !strings.Contains(err.Error(), "This credential was revoked") {
		t.Fatalf("listen returned %v, want the gateway's reason\n%s", err, out.String())
	}
	if n := connections.Load(); n != 1 {
		t.Fatalf("listen connected %d times, want once: it must not reconnect", n)
	}
	if strings.Contains(out.String(), "reconnecting") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// A stream that begins by saying events were missed makes listen say that
// events may be missing, and the stream goes on.
func TestListenSaysWhenEventsWereMissed(t *testing.T) {
	out, err := listenTo(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: events_missed\nid: r1\ndata: {\"code\":\"events_expired\",\"message\":\"gone\",\"resume_from\":\"r1\"}\n\n")
		fmt.Fprint(w, "id: p2\ndata: {\"id\":\"evt_2\",\"event\":\"job.opened\"}\n\n")
		// Ended, so that listen returns: what it queued is forwarded first.
		fmt.Fprint(w, "event: error\ndata: {\"error\":{\"code\":\"credential_revoked\",\"message\":\"revoked\"}}\n\n")
	}))
	if err == nil {
		t.Fatal("listen ended without the gateway's error")
	}
	if !strings.Contains(out.String(), "may be missing") || !strings.Contains(out.String(), "job.opened") {
		t.Fatalf("output:\n%s", out.String())
	}
	if strings.Contains(out.String(), "not an event") {
		t.Fatalf("the notice was forwarded as an event:\n%s", out.String())
	}
}

// A gateway that is not there at all when listen starts ends it at once,
// naming the address tried and how to give another; it does not retry
// for ever.
func TestListenGivesUpOnAGatewayThatIsNotThere(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out := &lines{}
	l := &listener{stream: "http://" + addr + "/v1/events/stream", token: "pgw_test_x", forwardTo: "http://127.0.0.1:1/hooks",
		secret: "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2U=", out: out, streamClient: http.DefaultClient, idle: time.Minute,
		forwardClient: http.DefaultClient, queue: 1}
	done := make(chan error, 1)
	go func() { done <- l.run(context.Background()) }()
	select {
	case err := <-done:
		want := "no gateway answers at http://" + addr + ": start one with `practicegw run`, or give yours with --url"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("listen ended with %v, want %q", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("listen still runs 10s after finding no gateway")
	}
	if strings.Contains(out.String(), "reconnecting") {
		t.Errorf("listen tried again:\n%s", out.String())
	}
}
