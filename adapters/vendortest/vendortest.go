// Package vendortest runs test doubles of the vendor APIs the adapters
// call, built from the vendors' published descriptions
// (shared/vendor-apis and the vendors' developer documentation): Karbon
// API v3, Xero Accounting and webhooks, Xero Practice Manager API v3.1,
// Microsoft Graph drive items,
// Google Drive files and Dropbox files. Each is an httptest server that
// checks the vendor's authentication headers, pages the way the vendor
// pages, answers the vendor's error shapes and signs webhooks the way the
// vendor signs them. Faults lets a test make any of them fail, rate-limit,
// stall or answer garbage.
//
// The doubles keep vendor-shaped records that tests add and change
// directly, as a user would in the vendor's own application
// (Karbon.MoveWorkItem, Xero.Pay). Beside them: Clock, a test clock for
// upstream.Clock that sleeps no real time; ListAll, which pages through
// any practice.Reader and checks the paging contract on the way; and
// practiceFiles, a practice's filing layout for the document stores, with
// FilePractice to file it in a store double and CheckDocuments to check
// what an adapter lists of it; FollowChanges, which reads a document
// store's change feed and checks each changed document against Get; and
// Fill, which fills a /v1 record for testing a hand-written encoder
// against encoding/json. The document store doubles log every change a
// test makes to their files and serve it through their vendor's change
// feed.
package vendortest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/practicegw/practicegw/internal/testclock"
)

// Fault is one scripted misbehaviour.
type Fault struct {
	// Status answers with this code (and Body) instead of serving.
	Status int
	// RetryAfter is sent as the Retry-After header.
	RetryAfter string
	// Body is the answer body; with Status 200 it replaces a good answer
	// (malformed JSON tests).
	Body string
	// Delay stalls before answering (or serving), ending early if the
	// client gives up.
	Delay time.Duration
}

// Faults makes a double misbehave. The zero value serves normally.
type Faults struct {
	mu    sync.Mutex
	queue []Fault
	down  *Fault
	hits  atomic.Int64
}

// Queue scripts the next requests, one fault each, in order.
func (f *Faults) Queue(fs ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, fs...)
}

// Down makes every request answer with fault until Up; an outage.
func (f *Faults) Down(fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = &fault
}

// Up ends an outage and drops queued faults.
func (f *Faults) Up() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down, f.queue = nil, nil
}

// Hits is how many requests reached the double.
func (f *Faults) Hits() int { return int(f.hits.Load()) }

func (f *Faults) next() *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down != nil {
		d := *f.down
		return &d
	}
	if len(f.queue) == 0 {
		return nil
	}
	q := f.queue[0]
	f.queue = f.queue[1:]
	return &q
}

// wrap serves h behind the faults.
func (f *Faults) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		fault := f.next()
		if fault == nil {
			h.ServeHTTP(w, r)
			return
		}
		if fault.Delay > 0 {
			// Read first: the server notices a client that gave up only
			// once the request's body is read.
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if !sleep(r.Context(), fault.Delay) {
				return
			}
		}
		if fault.Status == 0 {
			h.ServeHTTP(w, r)
			return
		}
		if fault.RetryAfter != "" {
			w.Header().Set("Retry-After", fault.RetryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(fault.Status)
		w.Write([]byte(fault.Body))
	})
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Clock is the tests' clock (internal/testclock) as the doubles' callers
// inject it for upstream.Clock: Sleep advances it at once and remembers
// how long was asked, so backoff and Retry-After waits take no real time.
type Clock = testclock.Clock

// NewClock starts a clock at now.
func NewClock(now time.Time) *Clock { return testclock.New(now) }

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(body)
}
