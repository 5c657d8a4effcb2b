// Command scaleout measures the scale-out of the read models by firms:
// several gateways (the real binary) on one redis-server, each firm on its
// own Karbon double (adapters/vendortest), each instance holding a share
// of the firms within a memory bound (read_model { memory, replicas }).
// It prints:
//
//   - each instance's peak RSS and the records and bytes it holds, against
//     the firms' total;
//   - /v1 read p50/p99 through instances that hold the firm and through
//     instances that do not (forwarded), and their ratio (target: the
//     non-holders' p99 within 1.5x of the holders');
//   - the time until every firm is held `replicas` times again after one
//     instance is SIGKILLed (target: 15 s);
//   - with -compare, each instance's peak RSS without a bound, over the
//     same data in the same Redis.
//
// Run it through bench/scaleout.sh; -firms and -records make it smaller.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
)

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "the practicegw binary (required)")
	flag.IntVar(&o.firms, "firms", 20, "firms, each on its own Karbon double")
	flag.IntVar(&o.records, "records", 200_000, "records over all firms (30% clients, 70% work items)")
	flag.IntVar(&o.instances, "instances", 3, "gateway instances")
	flag.IntVar(&o.replicas, "replicas", 2, "instances holding each firm")
	flag.StringVar(&o.memory, "memory", "", "the bound on each instance (default: room for 1.2x its share, so that placement is forced)")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "length of the read load")
	flag.IntVar(&o.rate, "rate", 40, "reads a second through each instance")
	flag.BoolVar(&o.compare, "compare", false, "also run the instances without a bound over the same data, for their RSS")
	flag.StringVar(&o.memLimit, "gomemlimit", "", "GOMEMLIMIT of every instance, as a container's memory limit sets it (such as 200MiB; default: none)")
	flag.StringVar(&o.profiles, "profiles", "", "a folder to keep each instance's heap profile and Go memory statistics in, at each phase")
	flag.Parse()
	if o.bin == "" {
		fail(errors.New("-bin is required"))
	}
	if err := run(o); err != nil {
		fail(err)
	}
}

type options struct {
	bin                                 string
	firms, records, instances, replicas int
	memory                              string
	duration                            time.Duration
	rate                                int
	compare                             bool
	memLimit, profiles                  string
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "scaleout:", err)
	os.Exit(1)
}

// bytesPerRecord is about what a Karbon record takes in a read model, as
// the bound counts it (practicegw_read_model_bytes over records).
const bytesPerRecord = 700

func run(o options) error {
	dir, err := os.MkdirTemp("", "practicegw-bench-scaleout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	redis, redisURL, err := startRedis(dir)
	if err != nil {
		return err
	}
	defer stopProcess(redis)

	per := o.records / o.firms
	firms := make([]string, o.firms)
	var blocks strings.Builder
	for i := range firms {
		firms[i] = fmt.Sprintf("frm_s%02d", i)
		k := karbon(per)
		defer k.Close()
		fmt.Fprintf(&blocks, `
		firm %s {
			records karbon {
				access_key %s
				bearer %s
				base_url %s
				upstream {
					timeout 10s
					rate_limit 600000/m
				}
			}
		}`, firms[i], k.AccessKey, k.Bearer, k.URL)
	}
	config := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(config, []byte(caddyfile(blocks.String())), 0o600); err != nil {
		return err
	}
	if o.memory == "" {
		share := int64(o.records) * bytesPerRecord * int64(o.replicas) / int64(o.instances)
		o.memory = strconv.FormatInt(share*12/10/(1<<20)+1, 10) + "MiB"
	}
	secrets := make([]byte, 32)
	for i := range secrets {
		secrets[i] = byte(rand.IntN(256))
	}
	env := []string{"PRACTICEGW_REDIS=" + redisURL, "PRACTICEGW_SECRETS_KEY=" + base64.StdEncoding.EncodeToString(secrets),
		"PRACTICEGW_READ_MODEL_MEMORY=" + o.memory, "PRACTICEGW_READ_MODEL_REPLICAS=" + strconv.Itoa(o.replicas),
		"PRACTICEGW_SYNC_POLL=5m", "PRACTICEGW_SYNC_RECONCILE=24h"}
	if o.memLimit != "" {
		// The instances' alone: this process holds the vendors' doubles.
		env = append(env, "GOMEMLIMIT="+o.memLimit)
	}
	fmt.Printf("%d firms of %d records (%d in all) on %d instances, replicas %d, memory %s each\n",
		o.firms, per, per*o.firms, o.instances, o.replicas, o.memory)
	if o.memLimit != "" {
		fmt.Printf("GOMEMLIMIT=%s on every instance, with or without a bound\n", o.memLimit)
	}

	// The backfill first, into Redis; then the instances measured start
	// together over the data, as after a deploy, so that their peak RSS
	// is the steady state's and not the backfill's.
	gws, err := startAll(o, config, dir, "backfill", env, true)
	if err != nil {
		return err
	}
	tokens := map[string]string{}
	for _, f := range firms {
		if tokens[f], err = gws[0].issue(f); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := waitLive(gws, firms, tokens, 30*time.Minute); err != nil {
		return err
	}
	fmt.Printf("backfilled in %s\n", time.Since(start).Round(time.Second))
	for _, g := range gws {
		g.stop()
	}
	if gws, err = startAll(o, config, dir, "gw", env, true); err != nil {
		return err
	}
	for _, g := range gws {
		defer g.stop()
	}
	if o.profiles != "" {
		if err := os.MkdirAll(o.profiles, 0o755); err != nil {
			return err
		}
		fmt.Printf("memory at each phase (heap profiles in %s):\n", o.profiles)
	}
	enterAll(gws, "placing", o.profiles)
	start = time.Now()
	if err := waitPlaced(gws, firms, o.replicas, 5*time.Minute); err != nil {
		return err
	}
	enterAll(gws, "placed", o.profiles)
	if err := waitLive(gws, firms, tokens, 5*time.Minute); err != nil {
		return err
	}
	enterAll(gws, "reading", o.profiles)
	fmt.Printf("started together over the data, placed and live in %s\n", time.Since(start).Round(time.Second))

	holders := map[string][]string{}
	for _, f := range firms {
		if holders[f], err = gws[0].heldBy(f); err != nil {
			return err
		}
	}
	held, nonHeld, err := load(gws, firms, tokens, holders, per, o.rate, o.duration)
	if err != nil {
		return err
	}
	enterAll(gws, "read", o.profiles)
	fmt.Printf("\nreads (%d a second through each instance for %s; a page of 50 clients, a page of jobs in one stage, a job by id):\n", o.rate, o.duration)
	fmt.Printf("  through a holder:     %6d reads  p50 %s  p99 %s\n", len(held), ms(pct(held, 0.50)), ms(pct(held, 0.99)))
	fmt.Printf("  through a non-holder: %6d reads  p50 %s  p99 %s\n", len(nonHeld), ms(pct(nonHeld, 0.50)), ms(pct(nonHeld, 0.99)))
	ratio := float64(pct(nonHeld, 0.99)) / float64(pct(held, 0.99))
	fmt.Printf("  non-holder p99 / holder p99 = %.2f (target at most 1.5) %s\n", ratio, verdict(ratio <= 1.5))

	fmt.Printf("\nper instance (bound %s):\n", o.memory)
	var total float64
	for _, g := range gws {
		m, err := g.metrics()
		if err != nil {
			return err
		}
		total += m.records
		fmt.Printf("  %s: peak RSS %s (while %s), holds %d firms, %.0f records (%.0f%% of %d), %s as the bound counts\n",
			g.name, mib(g.peakRSS()), g.peakPhase(), int(m.firms), m.records, 100*m.records/float64(per*o.firms), per*o.firms, mib(int64(m.bytes)))
	}
	fmt.Printf("  records held in all: %.0f = %.2f x the firms' %d\n", total, total/float64(per*o.firms), per*o.firms)

	victim := gws[len(gws)-1]
	enterAll(gws[:len(gws)-1], "rehold", "")
	killed := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	_ = victim.cmd.Wait()
	rest := gws[:len(gws)-1]
	// Every firm the dead instance held is held by the others again, as
	// often as their bounds allow (with a bound under the firms' total,
	// two instances cannot hold every firm twice: capacity is short).
	if err := waitHeld(rest, firms, 1, o.replicas, time.Minute); err != nil {
		return err
	}
	took := time.Since(killed)
	short := 0
	for _, f := range firms {
		if h, _ := rest[0].heldBy(f); len(h) < o.replicas {
			short++
		}
	}
	fmt.Printf("\nSIGKILL of %s: every firm held again by the others after %s (target 15s) %s; %d firms held fewer than %d times (capacity short)\n",
		victim.name, took.Round(10*time.Millisecond), verdict(took <= 15*time.Second), short, o.replicas)

	if o.compare {
		for _, g := range gws {
			g.stop()
		}
		unbounded := slices.DeleteFunc(slices.Clone(env), func(v string) bool { return strings.HasPrefix(v, "PRACTICEGW_READ_MODEL_") })
		fmt.Printf("\nwithout a bound, over the same data (the same reads for %s through each):\n", o.duration)
		ungws, err := startAll(o, config, dir, "unbounded", unbounded, false)
		if err != nil {
			return err
		}
		enterAll(ungws, "loading", o.profiles)
		if err := waitLive(ungws, firms, tokens, 30*time.Minute); err != nil {
			return err
		}
		enterAll(ungws, "reading", o.profiles)
		if _, _, err := load(ungws, firms, tokens, nil, per, o.rate, o.duration); err != nil {
			return err
		}
		enterAll(ungws, "read", o.profiles)
		for _, g := range ungws {
			defer g.stop()
			m, err := g.metrics()
			if err != nil {
				return err
			}
			fmt.Printf("  %s: peak RSS %s (while %s), holds %d firms, %.0f records\n", g.name, mib(g.peakRSS()), g.peakPhase(), int(m.firms), m.records)
		}
	}
	return nil
}

// startAll starts the instances at once.
func startAll(o options, config, dir, name string, env []string, advertise bool) ([]*gateway, error) {
	gws := make([]*gateway, o.instances)
	errs := make([]error, o.instances)
	var wg sync.WaitGroup
	for i := range gws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gws[i], errs[i] = startGateway(o.bin, config, dir, fmt.Sprintf("%s%d", name, i), env, advertise)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, g := range gws {
			if g != nil {
				g.stop()
			}
		}
		return nil, err
	}
	return gws, nil
}

// karbon is a Karbon double with n records: 30% contacts, 70% work items.
func karbon(n int) *vendortest.Karbon {
	epoch := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	k := vendortest.NewKarbon()
	k.KeepListRows(true)
	for i := range 10 {
		k.AddUser(vendortest.KarbonUser{Id: fmt.Sprintf("U%03d", i), Name: fmt.Sprintf("Staff %d", i),
			EmailAddress: fmt.Sprintf("staff%d@firm.example", i), Roles: []string{"Manager"}})
	}
	contacts := max(1, n*3/10)
	for i := range contacts {
		k.AddContact(vendortest.KarbonContact{ContactKey: fmt.Sprintf("C%06d", i), FirstName: "Client", LastName: fmt.Sprintf("%06d", i),
			ContactType: "Client", Email: fmt.Sprintf("c%d@example.com", i), Country: "GB", OwnerKey: fmt.Sprintf("U%03d", i%10),
			LastModified: epoch})
	}
	statuses := [][2]string{{"InProgress", ""}, {"InProgress", "In Review"}, {"Planned", ""}, {"Completed", "Filed"}}
	for i := range n - contacts {
		st := statuses[i%len(statuses)]
		deadline := epoch.AddDate(0, 0, i%365).Format(time.RFC3339)
		k.AddWorkItem(vendortest.KarbonWorkItem{WorkItemKey: fmt.Sprintf("W%06d", i), Title: fmt.Sprintf("Accounts %d", i),
			AssigneeKey: fmt.Sprintf("U%03d", i%10), ClientKey: fmt.Sprintf("C%06d", i%contacts), ClientType: "Contact",
			StartDate: epoch.Format(time.RFC3339), DeadlineDate: &deadline, WorkType: "Accounts", PrimaryStatus: st[0], SecondaryStatus: st[1]})
	}
	return k
}

func caddyfile(firms string) string {
	return `{
	admin {$PRACTICEGW_ADMIN}
	practicegw {
		data_dir {$PRACTICEGW_DATA}
		redis {$PRACTICEGW_REDIS}` + firms + `
	}
}

http://{$PRACTICEGW_LISTEN} {
	@probes path /healthz /readyz
	handle @probes {
		practicegw_health
	}
	handle /v1/* {
		practicegw_auth
		practicegw_ratelimit
		practicegw_api
	}
	handle {
		practicegw_api
	}
}
`
}

func startRedis(dir string) (*exec.Cmd, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("redis-server: %w", err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return cmd, "redis://" + addr + "/0", nil
		}
	}
	stopProcess(cmd)
	return nil, "", errors.New("redis-server did not start")
}

func stopProcess(cmd *exec.Cmd) {
	if cmd.Process != nil && cmd.ProcessState == nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

type gateway struct {
	name, bin, addr, admin string
	// advertise is its internal listener's URL, when it shares the firms.
	advertise string
	env       []string
	cmd       *exec.Cmd
	logs      bytes.Buffer

	mu sync.Mutex
	// peak is the process's peak resident set, and peakIn the phase of
	// the run it was reached in; phase is the phase now.
	peak          int64
	phase, peakIn string
	sampled       chan struct{}
}

func startGateway(bin, config, dir, name string, env []string, advertise bool) (*gateway, error) {
	g := &gateway{name: name, bin: bin}
	var err error
	if g.addr, err = freeAddr(); err != nil {
		return nil, err
	}
	if g.admin, err = freeAddr(); err != nil {
		return nil, err
	}
	g.env = append(os.Environ(), "PRACTICEGW_LISTEN="+g.addr, "PRACTICEGW_ADMIN="+g.admin,
		"PRACTICEGW_DATA="+filepath.Join(dir, name), "PRACTICEGW_KAFKA=")
	g.env = append(g.env, env...)
	if advertise {
		internal, err := freeAddr()
		if err != nil {
			return nil, err
		}
		g.advertise = "http://" + internal
		g.env = append(g.env, "PRACTICEGW_INTERNAL_LISTEN="+internal, "PRACTICEGW_ADVERTISE="+g.advertise)
	}
	g.cmd = exec.Command(bin, "run", "--config", config, "--adapter", "caddyfile")
	g.cmd.Env = g.env
	g.cmd.Stdout, g.cmd.Stderr = &g.logs, &g.logs
	if err := g.cmd.Start(); err != nil {
		return nil, err
	}
	g.phase = "start"
	g.sampled = make(chan struct{})
	go g.sample()
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + g.addr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return g, nil
			}
		}
	}
	g.stop()
	return nil, fmt.Errorf("%s did not start within 5 minutes", name)
}

func (g *gateway) stop() {
	g.peakRSS()
	stopProcess(g.cmd)
	<-g.sampled
}

// sample reads the process's peak resident set every 50 ms until it ends,
// noting the phase of the run in which it grew last.
func (g *gateway) sample() {
	defer close(g.sampled)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for range t.C {
		if _, ok := g.status("VmHWM"); !ok {
			return
		}
		g.peakRSS()
	}
}

// status reads one of the process's /proc status figures, in bytes.
func (g *gateway) status(field string) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		return 0, false
	}
	m := regexp.MustCompile(field + `:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0, false
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10, true
}

// peakRSS is the process's peak resident set (VmHWM), kept once it ends.
func (g *gateway) peakRSS() int64 {
	hwm, ok := g.status("VmHWM")
	g.mu.Lock()
	defer g.mu.Unlock()
	if ok && hwm > g.peak {
		g.peak, g.peakIn = hwm, g.phase
	}
	return g.peak
}

// enter starts a phase of the run: the peak resident set reached in it
// is told apart from the others'. With -profiles, the heap profile and
// Go's memory statistics at its start are kept.
func (g *gateway) enter(phase, profiles string) {
	g.peakRSS()
	g.mu.Lock()
	g.phase = phase
	g.mu.Unlock()
	if profiles == "" {
		return
	}
	if err := g.keepProfile(phase, profiles); err != nil {
		fmt.Fprintf(os.Stderr, "scaleout: profile of %s at %s: %v\n", g.name, phase, err)
	}
}

func (g *gateway) keepProfile(phase, dir string) error {
	resp, err := client.Get("http://" + g.admin + "/debug/pprof/heap")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, g.name+"-"+phase+".heap"), b.Bytes(), 0o644); err != nil {
		return err
	}
	vars, err := client.Get("http://" + g.admin + "/debug/vars")
	if err != nil {
		return err
	}
	defer vars.Body.Close()
	var v struct {
		Memstats struct {
			HeapAlloc, HeapInuse, HeapIdle, HeapReleased, HeapSys, StackSys, Sys, NextGC uint64
			NumGC                                                                        uint32
		} `json:"memstats"`
	}
	if err := json.NewDecoder(vars.Body).Decode(&v); err != nil {
		return err
	}
	m := v.Memstats
	rss, _ := g.status("VmRSS")
	hwm, _ := g.status("VmHWM")
	line := fmt.Sprintf("%-12s %-10s RSS %4d MiB (peak %4d)  heap alloc %4d inuse %4d idle %4d released %4d  sys %4d  next GC %4d  GCs %d\n",
		g.name, phase, rss>>20, hwm>>20, m.HeapAlloc>>20, m.HeapInuse>>20, m.HeapIdle>>20, m.HeapReleased>>20, m.Sys>>20, m.NextGC>>20, m.NumGC)
	f, err := os.OpenFile(filepath.Join(dir, "memstats.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(line)
	fmt.Print("  " + line)
	return err
}

// peakPhase is the phase the process reached its peak resident set in.
func (g *gateway) peakPhase() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peakIn
}

// enterAll starts a phase on every instance.
func enterAll(gws []*gateway, phase, profiles string) {
	for _, g := range gws {
		g.enter(phase, profiles)
	}
}

func (g *gateway) issue(firm string) (string, error) {
	cmd := exec.Command(g.bin, "credential", "issue", "--json", "--firm", firm, "--name", "bench scaleout",
		"--scopes", "clients:read,jobs:read", "--rate-limit", "1000000/s")
	cmd.Env = g.env
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("credential issue: %w", err)
	}
	var c struct{ Token string }
	if err := json.Unmarshal(out, &c); err != nil || c.Token == "" {
		return "", fmt.Errorf("credential issue output %q: %v", out, err)
	}
	return c.Token, nil
}

var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func (g *gateway) get(token, path string) (*http.Response, []byte, error) {
	req, _ := http.NewRequest("GET", "http://"+g.addr+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp, b.Bytes(), err
}

func (g *gateway) heldBy(firm string) ([]string, error) {
	resp, err := client.Get("http://" + g.admin + "/practicegw/sync/" + firm)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct {
			HeldBy []string `json:"held_by"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Data) == 0 {
		return nil, fmt.Errorf("sync status of %s: %v", firm, err)
	}
	return body.Data[0].HeldBy, nil
}

type held struct{ firms, records, bytes float64 }

func (g *gateway) metrics() (held, error) {
	resp, err := client.Get("http://" + g.admin + "/metrics")
	if err != nil {
		return held{}, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	var h held
	for _, line := range strings.Split(b.String(), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, _ := strconv.ParseFloat(val, 64)
		switch {
		case name == "practicegw_read_model_firms":
			h.firms = v
		case strings.HasPrefix(name, "practicegw_read_model_records{"):
			h.records += v
		case strings.HasPrefix(name, "practicegw_read_model_bytes{"):
			h.bytes += v
		}
	}
	return h, nil
}

// waitLive waits until every firm answers all its clients, live, through
// every instance.
func waitLive(gws []*gateway, firms []string, tokens map[string]string, within time.Duration) error {
	deadline := time.Now().Add(within)
	live := func(g *gateway, f, path string) error {
		resp, _, err := g.get(tokens[f], path)
		if err == nil && (resp.StatusCode != 200 || resp.Header.Get("Data-State") != "live") {
			err = fmt.Errorf("%d, %s", resp.StatusCode, resp.Header.Get("Data-State"))
		}
		return err
	}
	for _, f := range firms {
		for _, g := range gws {
			for _, path := range []string{"/v1/clients?limit=1", "/v1/jobs?limit=1"} {
				for err := live(g, f, path); err != nil; err = live(g, f, path) {
					if time.Now().After(deadline) {
						return fmt.Errorf("%s %s not live through %s within %s (%v)", f, path, g.name, within, err)
					}
					time.Sleep(500 * time.Millisecond)
				}
			}
		}
	}
	return nil
}

// waitPlaced waits until gws all say every firm is held replicas times,
// by instances among them.
func waitPlaced(gws []*gateway, firms []string, replicas int, within time.Duration) error {
	return waitHeld(gws, firms, replicas, replicas, within)
}

// waitHeld waits until gws all say every firm is held between least and
// most times, by instances among them.
func waitHeld(gws []*gateway, firms []string, least, most int, within time.Duration) error {
	addrs := map[string]bool{}
	for _, g := range gws {
		addrs[g.advertise] = true
	}
	deadline := time.Now().Add(within)
	for {
		ok := true
		for _, g := range gws {
			for _, f := range firms {
				h, err := g.heldBy(f)
				if err != nil || len(h) < least || len(h) > most {
					ok = false
					break
				}
				for _, a := range h {
					ok = ok && addrs[a]
				}
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("firms not held %d to %d times within %s", least, most, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// load reads through every instance at rate a second for d, and sorts the
// latencies by whether the instance held the firm read.
func load(gws []*gateway, firms []string, tokens map[string]string, holders map[string][]string, per, rate int,
	d time.Duration) (held, nonHeld []time.Duration, err error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	jobs := max(1, per-per*3/10)
	for _, g := range gws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(len(g.addr)), uint64(time.Now().UnixNano())))
			tick := time.NewTicker(time.Second / time.Duration(rate))
			defer tick.Stop()
			var inflight sync.WaitGroup
			for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
				f := firms[rng.IntN(len(firms))]
				var path string
				switch rng.IntN(3) {
				case 0:
					path = "/v1/clients?limit=50"
				case 1:
					path = "/v1/jobs?limit=50&stage=in_review"
				default:
					path = fmt.Sprintf("/v1/jobs/job_W%06d", rng.IntN(jobs))
				}
				holder := slices.Contains(holders[f], g.advertise)
				inflight.Add(1)
				go func() {
					defer inflight.Done()
					start := time.Now()
					resp, _, err := g.get(tokens[f], path)
					took := time.Since(start)
					mu.Lock()
					defer mu.Unlock()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("GET %s through %s: %d", path, g.name, resp.StatusCode)
					}
					if err != nil {
						if firstErr == nil {
							firstErr = err
						}
						return
					}
					if holder {
						held = append(held, took)
					} else {
						nonHeld = append(nonHeld, took)
					}
				}()
			}
			inflight.Wait()
		}()
	}
	wg.Wait()
	return held, nonHeld, firstErr
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func verdict(ok bool) string {
	if ok {
		return "OK"
	}
	return "MISSED"
}
