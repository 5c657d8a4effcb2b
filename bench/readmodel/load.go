package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
)

// class groups the reads of the mix.
type class string

const (
	plain    class = "page"
	filtered class = "filtered page"
	single   class = "get"
)

// read is one request of the mix; ids, when set, are what {id} is drawn
// from.
type read struct {
	class class
	path  string
	ids   []string
}

// tenant is a firm as the load sees it: its credential and its mix.
type tenant struct {
	firm, token string
	mix         []read
}

var hc = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func (g *gateway) get(token, path string) ([]byte, error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+g.addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %d %.200s", path, resp.StatusCode, b)
	}
	return b, err
}

type page struct {
	Data []struct {
		ID string `json:"id"`
	} `json:"data"`
	NextCursor string `json:"next_cursor"`
}

func (g *gateway) page(token, path string) (page, error) {
	var p page
	b, err := g.get(token, path)
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	return p, err
}

// mixFor reads the first pages of the firm's collections (before any
// measured window) for ids to read, an owner and a second page's cursor:
// list pages plain and with filters Karbon cannot apply, and single reads
// across clients, jobs, invoices, people and documents.
func (g *gateway) mixFor(firm, token string) (tenant, error) {
	t := tenant{firm: firm, token: token}
	ids := map[string][]string{}
	for _, k := range []string{"clients", "jobs", "invoices", "people", "documents"} {
		p, err := g.page(token, "/v1/"+k+"?limit=200")
		if err != nil {
			return t, err
		}
		for _, d := range p.Data {
			ids[k] = append(ids[k], d.ID)
		}
		if len(ids[k]) == 0 {
			return t, fmt.Errorf("%s has no %s", firm, k)
		}
	}
	jobs, err := g.page(token, "/v1/jobs?limit=50")
	if err != nil {
		return t, err
	}
	owner := ids["people"][0]
	t.mix = []read{
		{class: plain, path: "/v1/clients?limit=50"},
		{class: plain, path: "/v1/jobs?limit=50"},
		{class: plain, path: "/v1/jobs?limit=50&cursor=" + url.QueryEscape(jobs.NextCursor)},
		{class: plain, path: "/v1/invoices?limit=50"},
		{class: plain, path: "/v1/people?limit=50"},
		{class: plain, path: "/v1/documents?limit=50"},
		{class: filtered, path: "/v1/jobs?stage=in_progress&owner=" + owner + "&limit=50"},
		{class: filtered, path: "/v1/jobs?stage=awaiting_client&deadline_before=2026-09-30&limit=50"},
		{class: filtered, path: "/v1/clients?status=active&owner=" + owner + "&limit=50"},
		{class: single, path: "/v1/clients/", ids: ids["clients"]},
		{class: single, path: "/v1/jobs/", ids: ids["jobs"]},
		{class: single, path: "/v1/invoices/", ids: ids["invoices"]},
		{class: single, path: "/v1/people/", ids: ids["people"]},
		{class: single, path: "/v1/documents/", ids: ids["documents"]},
	}
	// Every read of the mix answers before anything is measured.
	for _, r := range t.mix {
		if _, err := g.get(token, r.url(rand.New(rand.NewPCG(1, 2)))); err != nil {
			return t, err
		}
	}
	return t, nil
}

func (r read) url(rng *rand.Rand) string {
	if r.ids == nil {
		return r.path
	}
	return r.path + r.ids[rng.IntN(len(r.ids))]
}

// latencies are one firm's reads by class.
type latencies map[class][]time.Duration

func (l latencies) all() []time.Duration {
	var out []time.Duration
	for _, ds := range l {
		out = append(out, ds...)
	}
	return out
}

// load sends rate reads a second to each tenant for d, the same read to
// each in turn, half an interval apart, and measures each from the moment
// it was due (a stalled gateway counts against it). Reads are bounded by
// rate*d per tenant and by workers in flight.
func (g *gateway) load(tenants []tenant, rate int, d time.Duration) (map[string]latencies, int, error) {
	type job struct {
		t   int
		url string
		cls class
		due time.Time
	}
	const workers = 16
	jobs := make(chan job, workers)
	res := make([]latencies, len(tenants))
	for i := range res {
		res[i] = latencies{}
	}
	var (
		mu     sync.Mutex
		failed int
		first  error
		wg     sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				_, err := g.get(tenants[j.t].token, j.url)
				took := time.Since(j.due)
				mu.Lock()
				if err != nil {
					failed++
					if first == nil {
						first = err
					}
				} else {
					res[j.t][j.cls] = append(res[j.t][j.cls], took)
				}
				mu.Unlock()
			}
		}()
	}
	n := int(float64(rate) * d.Seconds())
	interval := time.Second / time.Duration(rate)
	step := interval / time.Duration(len(tenants))
	rng := rand.New(rand.NewPCG(7, 11))
	begin := time.Now()
	for i := range n {
		r := i % len(tenants[0].mix)
		for ti, t := range tenants {
			due := begin.Add(time.Duration(i)*interval + time.Duration(ti)*step)
			if w := time.Until(due); w > 0 {
				time.Sleep(w)
			}
			jobs <- job{t: ti, url: t.mix[r].url(rng), cls: t.mix[r].class, due: due}
		}
	}
	close(jobs)
	wg.Wait()
	out := map[string]latencies{}
	for i, t := range tenants {
		out[t.firm] = res[i]
	}
	if failed > 0 {
		return out, failed, fmt.Errorf("%d reads failed, first: %w", failed, first)
	}
	return out, 0, nil
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(int(p*float64(len(s))), len(s)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }
