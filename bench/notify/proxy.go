package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"
)

// proxy stands where the vendors send their notifications, in front of the
// gateway's front door: it notes when each arrived and passes it on, so
// that a change's time to its webhook can be told from its notification.
type proxy struct {
	srv *httptest.Server
	mu  sync.Mutex
	to  string
	log []notice
}

// notice is one notification the proxy passed on.
type notice struct {
	path string
	at   time.Time
	body []byte
	took time.Duration // until the gateway answered
}

func newProxy() *proxy {
	p := &proxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

func (p *proxy) url() string { return p.srv.URL }
func (p *proxy) close()      { p.srv.Close() }

// forward passes what comes to the gateway at to.
func (p *proxy) forward(to string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.to = to
}

var passOn = &http.Client{Timeout: 30 * time.Second}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	to := p.to
	logged := -1
	if r.Method == http.MethodPost && r.URL.Query().Get("validationToken") == "" {
		logged = len(p.log)
		p.log = append(p.log, notice{path: r.URL.Path, at: at, body: body})
	}
	p.mu.Unlock()
	if to == "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	req, err := http.NewRequest(r.Method, to+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := passOn.Do(req)
	if logged >= 0 {
		p.mu.Lock()
		p.log[logged].took = time.Since(at)
		p.mu.Unlock()
	}
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// first is when the first notification to path at or after t came whose
// body names what match looks for (nil: any); zero when none did.
func (p *proxy) first(path string, t time.Time, match func([]byte) bool) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range p.log {
		if n.path == path && !n.at.Before(t) && (match == nil || match(n.body)) {
			return n.at
		}
	}
	return time.Time{}
}

// told says how many notifications to path came from t to u and how
// long the gateway took to answer them.
func (p *proxy) told(path string, t, u time.Time) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var took []time.Duration
	open := 0
	for _, k := range p.log {
		if k.path == path && !k.at.Before(t) && !k.at.After(u) {
			if k.took == 0 {
				open++ // not answered yet
				continue
			}
			took = append(took, k.took)
		}
	}
	if len(took) == 0 {
		return fmt.Sprintf("%d notifications, none answered yet", open)
	}
	slices.Sort(took)
	return fmt.Sprintf("%d notifications answered in p50 %s, max %s (%d not yet)", len(took)+open, fmtDur(took[len(took)/2]), fmtDur(took[len(took)-1]), open)
}
