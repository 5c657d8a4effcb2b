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
}

func newReceiver(dead bool) *receiver {
	rc := &receiver{at: map[string]time.Time{}, dead: dead}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(r.Body)
	if rc.dead {
		<-r.Context().Done()
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
	deadline := time.Now().Add(within)
	for {
		rc.mu.Lock()
		got := make(map[string]time.Time, len(ids))
		for _, id := range ids {
			if at, ok := rc.at[id]; ok {
				got[id] = at
			}
		}
		rc.mu.Unlock()
		if len(got) == len(ids) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (rc *receiver) close() {
	rc.srv.CloseClientConnections()
	rc.srv.Close()
}
