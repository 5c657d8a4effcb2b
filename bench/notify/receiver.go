package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// receiver is the integration's webhook endpoint: it notes when each
// event first arrived, by its kind and the record it names.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string]time.Time // "<event> <record id>"
}

func newReceiver() *receiver {
	rc := &receiver{got: map[string]time.Time{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	return rc
}

func (rc *receiver) url() string { return rc.srv.URL + "/hooks" }
func (rc *receiver) close()      { rc.srv.Close() }

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(r.Body)
	var env struct {
		Event string         `json:"event"`
		Data  map[string]any `json:"data"`
	}
	if json.Unmarshal(body, &env) == nil {
		resource, _, _ := strings.Cut(env.Event, ".")
		if id, ok := env.Data[resource+"_id"].(string); ok {
			rc.mu.Lock()
			if _, seen := rc.got[env.Event+" "+id]; !seen {
				rc.got[env.Event+" "+id] = at
			}
			rc.mu.Unlock()
		}
	}
	w.WriteHeader(http.StatusOK)
}

// arrived is when event about id first arrived; zero before it did.
func (rc *receiver) arrived(event, id string) time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.got[event+" "+id]
}
