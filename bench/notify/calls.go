package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// callLog stands in front of a vendor double and notes each call the
// gateway makes to it, when it began and how long the double took, so
// that a burst's time can be split into the vendor's answering and the
// gateway's waiting, and its calls counted.
type callLog struct {
	srv  *httptest.Server
	mu   sync.Mutex
	logs []call
}

// call is one request the gateway made to a vendor.
type call struct {
	at   time.Time
	took time.Duration
	what string // METHOD path, without the query's values
}

// newCallLog passes what comes to it on to the double at target
// (scheme://host) and answers its base, to put in target's place.
func newCallLog(target string) *callLog {
	to, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(to)
	c := &callLog{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		rp.ServeHTTP(w, r)
		var keys []string
		for k := range r.URL.Query() {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		what := r.Method + " " + shape(r.URL.Path)
		if len(keys) > 0 {
			what += "?" + strings.Join(keys, ",")
		}
		c.mu.Lock()
		c.logs = append(c.logs, call{at: at, took: time.Since(at), what: what})
		c.mu.Unlock()
	}))
	return c
}

func (c *callLog) url() string { return c.srv.URL }
func (c *callLog) close()      { c.srv.Close() }

// between are the calls begun from t to u.
func (c *callLog) between(t, u time.Time) []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []call
	for _, k := range c.logs {
		if !k.at.Before(t) && !k.at.After(u) {
			out = append(out, k)
		}
	}
	return out
}

// summary says, of the calls begun from t to u, how many of each, when
// the first and last began after t, and the vendor's answering time.
func summary(calls []call, t time.Time) string {
	if len(calls) == 0 {
		return "no vendor calls"
	}
	count := map[string]int{}
	var took []time.Duration
	for _, k := range calls {
		count[k.what]++
		took = append(took, k.took)
	}
	var parts []string
	for what, n := range count {
		parts = append(parts, fmt.Sprintf("%d× %s", n, what))
	}
	slices.Sort(parts)
	slices.Sort(took)
	return fmt.Sprintf("%d vendor calls (%s); begun +%s to +%s; answered in p50 %s, max %s", len(calls), strings.Join(parts, ", "),
		fmtDur(calls[0].at.Sub(t)), fmtDur(calls[len(calls)-1].at.Sub(t)), fmtDur(took[len(took)/2]), fmtDur(took[len(took)-1]))
}

// cpu is the CPU time process pid has used so far (zero when unknown).
func cpu(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// After the command's name in parentheses: state is field 3, utime
	// and stime fields 14 and 15, in clock ticks of 1/100 s.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	s, _ := strconv.Atoi(f[12])
	return time.Duration(u+s) * 10 * time.Millisecond
}

// startTrace writes the gateway's execution trace of the next 5 s to
// path; the channel is closed when it is written.
func startTrace(admin, path string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(admin + "/debug/pprof/trace?seconds=5")
		if err != nil {
			fmt.Fprintln(os.Stderr, "notify: trace:", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "notify: trace:", err)
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
	}()
	return done
}

// shape is a call's path with the segments that name a record (a digit
// among four characters or more, no dot) as {id}, so that a call a
// record counts as one kind.
func shape(path string) string {
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		if len(seg) >= 4 && !strings.Contains(seg, ".") && strings.ContainsAny(seg, "0123456789") {
			segs[i] = "{id}"
		}
	}
	return strings.Join(segs, "/")
}
