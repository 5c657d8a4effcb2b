package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// receiver is a webhook endpoint in this process that notes when each
// client's event first arrived; a dead one never answers.
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	at   map[string]time.Time
	dead bool
	// closing ends a dead receiver's requests when it closes.
	closing chan struct{}
}

// arrived counts the distinct clients whose event arrived.
func (rc *receiver) arrived() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.at)
}

func newReceiver(dead bool) *receiver {
	rc := &receiver{at: map[string]time.Time{}, dead: dead, closing: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(r.Body)
	if rc.dead {
		select {
		case <-r.Context().Done():
		case <-rc.closing:
		}
		return
	}
	var env struct {
		Data struct {
			ClientID string `json:"client_id"`
		} `json:"data"`
	}
	json.Unmarshal(body, &env)
	rc.mu.Lock()
	if _, ok := rc.at[env.Data.ClientID]; !ok {
		rc.at[env.Data.ClientID] = now
	}
	rc.mu.Unlock()
}

func (rc *receiver) url() string { return rc.srv.URL + "/hooks" }

// wait waits until every id arrived or within passed, and returns the
// arrivals of ids.
func (rc *receiver) wait(ids []string, within time.Duration) map[string]time.Time {
	// Counting is cheap; matching ids against arrivals is done once, so
	// that the benchmark does not compete with what it measures.
	// The count includes arrivals of other ids (the warm-up), so once it
	// says all are in, the ids themselves are checked.
	deadline := time.Now().Add(within)
	for {
		if rc.arrived() >= len(ids) {
			if got := rc.of(ids); len(got) == len(ids) {
				return got
			}
		}
		if !time.Now().Before(deadline) {
			return rc.of(ids)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// of is the arrivals of ids so far.
func (rc *receiver) of(ids []string) map[string]time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	got := make(map[string]time.Time, len(ids))
	for _, id := range ids {
		if at, ok := rc.at[id]; ok {
			got[id] = at
		}
	}
	return got
}

func (rc *receiver) close() {
	close(rc.closing)
	rc.srv.CloseClientConnections()
	rc.srv.Close()
}
