package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
)

// boundedFirms are the firms of the scale-out by firms tests, each with
// its own copy of the one Karbon double's records.
var boundedFirms = []string{"frm_b0", "frm_b1", "frm_b2", "frm_b3", "frm_b4", "frm_b5"}

// boundedCluster is gateways on one Redis, each holding a share of the
// firms within a memory bound (replicas 2).
type boundedCluster struct {
	t      *testing.T
	config string
	env    []string
	k      *vendortest.Karbon
}

func newBoundedCluster(t *testing.T) *boundedCluster {
	t.Helper()
	redis := redistest.Start(t)
	v := startVendors(t, vendorOptions{})
	var firms strings.Builder
	for _, f := range boundedFirms {
		fmt.Fprintf(&firms, `
		firm %s {
			records karbon {
				access_key {env.TEST_KARBON_ACCESS_KEY}
				bearer {env.TEST_KARBON_BEARER}
				base_url %s
				upstream {
					timeout 2s
					rate_limit 60000/m
				}
			}
		}`, f, v.k.URL)
	}
	caddyfile := `{
	admin {$PRACTICEGW_ADMIN}
	practicegw {
		data_dir {$PRACTICEGW_DATA}
		redis {$PRACTICEGW_REDIS}` + firms.String() + `
	}
}

http://{$PRACTICEGW_LISTEN} {
	log {
		output stderr
		format filter {
			wrap json
			fields {
				request>headers>Practicegw-Forwarded delete
			}
		}
	}
	@probes path /healthz /readyz
	handle @probes {
		practicegw_health
	}
	handle /v1/openapi.json {
		practicegw_api
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
	path := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(path, []byte(caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	return &boundedCluster{t: t, config: path, k: v.k, env: append(slices.Clone(v.env),
		"PRACTICEGW_REDIS="+redis.URL(), "PRACTICEGW_SECRETS_KEY="+secretsKey(),
		// A firm here is about 400 records, a quarter of a MiB: each
		// instance has room for about 8 of the 12 holdings.
		"PRACTICEGW_READ_MODEL_MEMORY=2MiB", "PRACTICEGW_READ_MODEL_REPLICAS=2")}
}

// start runs one more instance, with an internal listener of its own,
// which it advertises.
func (c *boundedCluster) start(env ...string) *gateway {
	internal := freePort(c.t)
	return c.startAt(internal, "http://"+internal, env...)
}

// startAt runs one more instance with its internal listener at internal,
// advertising advertise (a proxy in front of it, say), with env added.
func (c *boundedCluster) startAt(internal, advertise string, env ...string) *gateway {
	env = append(append(slices.Clone(c.env), "PRACTICEGW_INTERNAL_LISTEN="+internal, "PRACTICEGW_ADVERTISE="+advertise), env...)
	g := startGateway(c.t, gatewayOptions{config: c.config, env: env})
	g.advertise = advertise
	g.internal = internal
	return g
}

// heldBy reads which instances hold a firm, from an instance's admin
// endpoint (the sync status).
func heldBy(t *testing.T, g *gateway, firm string) []string {
	t.Helper()
	resp, err := http.Get("http://" + g.admin + "/practicegw/sync/" + firm)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct {
			HeldBy []string `json:"held_by"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Data) == 0 {
		t.Fatalf("sync status of %s: %v", firm, err)
	}
	return body.Data[0].HeldBy
}

// waitPlaced waits until every firm is held by two of gws, as each of
// them says, and by none that is not among them.
func waitPlaced(t *testing.T, within time.Duration, gws ...*gateway) {
	t.Helper()
	addrs := make([]string, len(gws))
	for i, g := range gws {
		addrs[i] = g.advertise
	}
	eventually.NoError(t, within, 50*time.Millisecond, "every firm held twice", func() error {
		for _, g := range gws {
			for _, f := range boundedFirms {
				held := heldBy(t, g, f)
				if len(held) != 2 {
					return fmt.Errorf("%s says %s is held by %v", g.addr, f, held)
				}
				for _, h := range held {
					if !slices.Contains(addrs, h) {
						return fmt.Errorf("%s says %s is held by %s, which is gone", g.addr, f, h)
					}
				}
			}
		}
		return nil
	})
}

// clientsOf lists a firm's clients through g, as JSON sorted by id.
func clientsOf(t *testing.T, g *gateway, tok string) string {
	t.Helper()
	b, err := json.Marshal(pageAll(t, g, tok, "/v1/clients", 200))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameEverywhere checks that every instance answers every firm's clients
// alike, all of them.
func sameEverywhere(t *testing.T, tokens map[string]string, gws ...*gateway) {
	t.Helper()
	for _, f := range boundedFirms {
		want := clientsOf(t, gws[0], tokens[f])
		if n := strings.Count(want, `"object":"client"`); n != 130 {
			t.Fatalf("%s lists %d of %s's 130 clients", gws[0].addr, n, f)
		}
		for _, g := range gws[1:] {
			if got := clientsOf(t, g, tokens[f]); got != want {
				t.Fatalf("%s's clients differ between %s and %s", f, gws[0].addr, g.addr)
			}
		}
	}
}

func counter(t *testing.T, g *gateway, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(metrics(t, g))
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestScaleOutByFirms: three instances on one Redis, each holding a share
// of six firms (replicas 2), answer every firm alike; a write through an
// instance that does not hold its firm reads back at once everywhere; a
// SIGKILLed instance's firms are held by the others within 15 s, and
// answered meanwhile; an instance that joins takes its share.
func TestScaleOutByFirms(t *testing.T) {
	c := newBoundedCluster(t)
	a, b, d := c.start(), c.start(), c.start()
	tokens := map[string]string{}
	for _, f := range boundedFirms {
		tokens[f] = a.issueWith(f, false, "100/s", allReadWrite...).Token
	}
	waitPlaced(t, 30*time.Second, a, b, d)
	// Backfills done: every firm's clients, alike through every instance.
	eventually.NoError(t, 60*time.Second, 100*time.Millisecond, "every firm backfilled", func() error {
		for _, f := range boundedFirms {
			r := a.do(t, "GET", "/v1/clients?limit=200", tokens[f], nil)
			if r.StatusCode != 200 || r.Header.Get("Data-State") != "live" || strings.Count(string(r.body), `"object":"client"`) != 130 {
				return fmt.Errorf("%s: %d %s, %d clients", f, r.StatusCode, r.Header.Get("Data-State"), strings.Count(string(r.body), `"object":"client"`))
			}
		}
		return nil
	})
	sameEverywhere(t, tokens, a, b, d)
	// The first to start held every firm until the others took theirs: it
	// lets go once they hold them, so each firm ends held twice. (Which
	// instances hold it is rendezvous' choice: one may hold every firm.)
	eventually.True(t, 20*time.Second, 50*time.Millisecond, "every firm held by two instances", func() bool {
		held := 0.0
		for _, g := range []*gateway{a, b, d} {
			held += counter(t, g, "practicegw_read_model_firms")
		}
		return held == float64(2*len(boundedFirms))
	})
	var forwarded float64
	for _, g := range []*gateway{a, b, d} {
		forwarded += counter(t, g, "practicegw_read_model_forwarded_total")
	}
	if forwarded == 0 {
		t.Fatal("no read was forwarded to a holder")
	}

	// A write through an instance that does not hold the firm reads back
	// at once from every instance.
	firm := boundedFirms[0]
	// The hand-over may still be under way (the first instance lets go of
	// a firm only once its new holders hold it): wait for an outsider.
	var outside *gateway
	eventually.True(t, 20*time.Second, 50*time.Millisecond, "an instance that does not hold "+firm, func() bool {
		holders := heldBy(t, a, firm)
		for _, g := range []*gateway{a, b, d} {
			if !slices.Contains(holders, g.advertise) {
				outside = g
				return true
			}
		}
		return false
	})
	r := outside.do(t, "PATCH", "/v1/clients/cli_c-C007", tokens[firm], map[string]any{"name": "Ann Renamed"})
	if r.StatusCode != 200 || r.json(t)["name"] != "Ann Renamed" {
		t.Fatalf("PATCH through %s, which does not hold %s: %d %s", outside.addr, firm, r.StatusCode, r.body)
	}
	for _, g := range []*gateway{a, b, d} {
		if got := g.do(t, "GET", "/v1/clients/cli_c-C007", tokens[firm], nil); got.StatusCode != 200 || got.json(t)["name"] != "Ann Renamed" {
			t.Fatalf("GET through %s right after the PATCH: %d %s", g.addr, got.StatusCode, got.body)
		}
	}

	// SIGKILL one: its firms are answered throughout, and held twice by
	// the others within 15 s.
	d.kill()
	killed := time.Now()
	for _, f := range boundedFirms {
		for _, g := range []*gateway{a, b} {
			if r := g.do(t, "GET", "/v1/clients/cli_c-C007", tokens[f], nil); r.StatusCode != 200 {
				t.Fatalf("%s through %s just after a SIGKILL: %d %s", f, g.addr, r.StatusCode, r.body)
			}
		}
	}
	waitPlaced(t, 15*time.Second, a, b)
	t.Logf("held twice again %s after the SIGKILL", time.Since(killed).Round(time.Millisecond))
	sameEverywhere(t, tokens, a, b)

	// One joins: it takes its share, and answers alike.
	e := c.start()
	// Every firm is held twice by a and b already: wait for the joining
	// instance's first rounds (a heartbeat, then its placement) to take
	// its share, rather than reading it before it has placed.
	eventually.True(t, 30*time.Second, 50*time.Millisecond, "the instance that joined holds its share", func() bool {
		return counter(t, e, "practicegw_read_model_firms") > 0
	})
	waitPlaced(t, 30*time.Second, a, b, e)
	sameEverywhere(t, tokens, a, b, e)
}
