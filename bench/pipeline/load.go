package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// client makes the API calls, as many at once as a run asks for.
var client = &http.Client{
	Timeout: 30 * time.Second,
	Transport: &http.Transport{
		Proxy: nil, MaxIdleConns: 2048, MaxIdleConnsPerHost: 2048, IdleConnTimeout: 90 * time.Second,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	},
}

// load drives one system through its API and receives its webhooks.
type load struct {
	sys  *system
	jobs chan *job
	rc   *receiver
}

type job struct{ id, stage string }

// change is one API call and its webhook, by the note it carries.
type change struct {
	start, answered time.Time
	arrived         atomic.Int64 // Unix nanoseconds of the first arrival at the healthy endpoint
}

func (l *load) call(ctx context.Context, method, path string, body []byte, want int) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, l.sys.api+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+l.sys.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return b, fmt.Errorf("%s %s: %d %.200s", method, path, resp.StatusCode, b)
	}
	return b, nil
}

// prepare loads the firm's jobs, which the changes move, and starts the
// receiver with the healthy endpoint.
func (l *load) prepare(ctx context.Context) error {
	var all []*job
	for cursor := ""; ; {
		b, err := l.call(ctx, "GET", "/v1/jobs?limit=200&cursor="+cursor, nil, 200)
		if err != nil {
			return err
		}
		var page struct {
			Data       []struct{ ID, Stage string }
			HasMore    bool   `json:"has_more"`
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return err
		}
		for _, j := range page.Data {
			all = append(all, &job{j.ID, j.Stage})
		}
		if !page.HasMore {
			break
		}
		cursor = page.NextCursor
	}
	l.jobs = make(chan *job, len(all))
	for _, j := range all {
		l.jobs <- j
	}
	l.rc = newReceiver()
	return l.endpoint(ctx, "/healthy")
}

// endpoint registers the receiver's path for job.stage_changed.
func (l *load) endpoint(ctx context.Context, path string) error {
	body, _ := json.Marshal(map[string]any{"url": l.rc.url() + path, "events": []string{"job.stage_changed"}})
	b, err := l.call(ctx, "POST", "/v1/webhook_endpoints", body, 201)
	if err != nil {
		return err
	}
	var ep struct{ Secret string }
	if err := json.Unmarshal(b, &ep); err != nil {
		return err
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(ep.Secret, "whsec_"))
	if err != nil {
		return fmt.Errorf("secret %q: %w", ep.Secret, err)
	}
	l.rc.addKey(key)
	return nil
}

// move makes one change: a job to a stage other than its own, which raises
// one job.stage_changed carrying the note. A job is moved by one call at a
// time.
func (l *load) move(ctx context.Context, note string, c *change) error {
	j := <-l.jobs
	defer func() { l.jobs <- j }()
	next := "in_review"
	if j.stage == "in_review" {
		next = "in_progress"
	}
	c.start = time.Now()
	_, err := l.call(ctx, "POST", "/v1/jobs/"+j.id+"/stage", []byte(`{"stage":"`+next+`","note":"`+note+`"}`), 200)
	c.answered = time.Now()
	if err != nil {
		return err
	}
	j.stage = next
	return nil
}

// phase is one run's changes, named by their notes.
type phase struct {
	name    string
	changes []change
	failed  atomic.Int64
}

func (l *load) newPhase(name string, n int) *phase {
	p := &phase{name: name, changes: make([]change, n)}
	l.rc.watch(p)
	return p
}

func (l *load) send(ctx context.Context, p *phase, i int) {
	if err := l.move(ctx, p.name+"-"+strconv.Itoa(i), &p.changes[i]); err != nil {
		if p.failed.Add(1) == 1 {
			fmt.Fprintln(os.Stderr, "pipeline: a change failed:", err)
		}
	}
}

// atRate sends p's changes at rate a second, open loop: change i is sent
// at its time whatever happened to earlier ones.
func (l *load) atRate(ctx context.Context, p *phase, rate int) {
	interval := time.Second / time.Duration(rate)
	sem := make(chan struct{}, 1024)
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range p.changes {
		if d := time.Until(begin.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			l.send(ctx, p, i)
		}()
	}
	wg.Wait()
}

// wait waits until every change of p answered by the API has arrived.
func (p *phase) wait(within time.Duration) (missing int) {
	deadline := time.Now().Add(within)
	for {
		missing = 0
		for i := range p.changes {
			c := &p.changes[i]
			if !c.answered.IsZero() && c.arrived.Load() == 0 {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// warm makes a few hundred changes at half the rate, unmeasured:
// connections, caches and the consumer group come up.
func (l *load) warm(ctx context.Context, rate int) error {
	p := l.newPhase("warm", max(rate, 50))
	l.atRate(ctx, p, max(rate/2, 25))
	if n := p.wait(60 * time.Second); n > 0 {
		return fmt.Errorf("%d warm-up changes never arrived", n)
	}
	return nil
}

// fixedRate measures change -> webhook at rate for d; with dead, beside
// an endpoint that never answers, subscribed to the same events.
func (l *load) fixedRate(ctx context.Context, rate int, d time.Duration, dead bool) (result, error) {
	if err := l.prepare(ctx); err != nil {
		return result{}, err
	}
	defer l.rc.close()
	if dead {
		if err := l.endpoint(ctx, "/dead"); err != nil {
			return result{}, err
		}
	}
	if err := l.warm(ctx, rate); err != nil {
		return result{}, err
	}
	p := l.newPhase("rate", int(float64(rate)*d.Seconds()))
	m := startMeter(l.sys.pids())
	l.atRate(ctx, p, rate)
	res := p.result(l.rc, p.wait(120*time.Second))
	m.stop(&res, len(p.changes))
	res.rate, res.unit = float64(len(p.changes))/d.Seconds(), "changes/s"
	return res, nil
}

// backlog submits n changes from conc clients, each sending its next as
// soon as its last was answered, and measures deliveries per second from
// the first call to the last webhook.
func (l *load) backlog(ctx context.Context, n, conc int) (result, error) {
	if err := l.prepare(ctx); err != nil {
		return result{}, err
	}
	defer l.rc.close()
	if err := l.warm(ctx, 200); err != nil {
		return result{}, err
	}
	p := l.newPhase("backlog", n)
	m := startMeter(l.sys.pids())
	begin := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				l.send(ctx, p, i)
			}
		}()
	}
	wg.Wait()
	submitted := time.Since(begin)
	res := p.result(l.rc, p.wait(10*time.Minute))
	m.stop(&res, n)
	var last int64
	for i := range p.changes {
		last = max(last, p.changes[i].arrived.Load())
	}
	res.rate, res.unit = float64(n-res.missing)/time.Unix(0, last).Sub(begin).Seconds(), "deliveries/s"
	res.note = fmt.Sprintf("API took the %d in %.1fs: %.0f/s", n, submitted.Seconds(), float64(n)/submitted.Seconds())
	return res, nil
}

// result gathers a phase's latencies: after the API's answer to the first
// arrival (0 when the webhook came first), and the API call itself.
func (p *phase) result(rc *receiver, missing int) result {
	res := result{missing: missing, failed: int(p.failed.Load()), loadEnd: loadavg()}
	for i := range p.changes {
		c := &p.changes[i]
		a := c.arrived.Load()
		if c.answered.IsZero() || a == 0 {
			continue
		}
		res.lat = append(res.lat, max(time.Unix(0, a).Sub(c.answered), 0))
		res.e2e = append(res.e2e, time.Unix(0, a).Sub(c.start))
		res.api = append(res.api, c.answered.Sub(c.start))
	}
	res.dups, res.badSig = int(rc.dups.Load()), int(rc.badSig.Load())
	return res
}

// receiver is the webhook endpoints: /healthy notes each change's first
// arrival; /dead never answers.
type receiver struct {
	srv     *httptest.Server
	mu      sync.RWMutex
	keys    [][]byte
	phases  map[string]*phase
	dups    atomic.Int64
	badSig  atomic.Int64
	closing chan struct{}
}

func newReceiver() *receiver {
	rc := &receiver{phases: map[string]*phase{}, closing: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	return rc
}

func (rc *receiver) url() string { return rc.srv.URL }

func (rc *receiver) addKey(k []byte) {
	rc.mu.Lock()
	rc.keys = append(rc.keys, k)
	rc.mu.Unlock()
}

func (rc *receiver) watch(p *phase) {
	rc.mu.Lock()
	rc.phases[p.name] = p
	rc.mu.Unlock()
}

func (rc *receiver) close() {
	close(rc.closing)
	rc.srv.Close()
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now().UnixNano()
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path == "/dead" {
		select {
		case <-r.Context().Done():
		case <-rc.closing:
		}
		return
	}
	if !rc.verify(r.Header, body) {
		rc.badSig.Add(1)
	}
	var env struct {
		Data struct{ Note string } `json:"data"`
	}
	json.Unmarshal(body, &env)
	name, num, _ := strings.Cut(env.Data.Note, "-")
	i, err := strconv.Atoi(num)
	rc.mu.RLock()
	p := rc.phases[name]
	rc.mu.RUnlock()
	if p != nil && err == nil && i >= 0 && i < len(p.changes) {
		if !p.changes[i].arrived.CompareAndSwap(0, at) {
			rc.dups.Add(1)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// verify checks the Standard Webhooks signature against the endpoints'
// secrets.
func (rc *receiver) verify(h http.Header, body []byte) bool {
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	rc.mu.RLock()
	defer rc.mu.RUnlock()
	for _, key := range rc.keys {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + ts + "."))
		m.Write(body)
		want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
		for _, s := range strings.Fields(h.Get("webhook-signature")) {
			if hmac.Equal([]byte(s), []byte(want)) {
				return true
			}
		}
	}
	return false
}
