package bolt_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/adapters/demo"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/groupcommit"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	boltstore "github.com/practicegw/practicegw/store/bolt"
)

var mergedSeeds = flag.Int("merged-seeds", 16, "schedules TestMergedStagesLoseNothing runs")
var mergedSeed = flag.Uint64("merged-seed", 0, "run only this schedule of TestMergedStagesLoseNothing")

// The embedded pipeline's merged stages (a demo record's write, its
// change's event and deliveries in one group commit, the deliveries an
// engine can start handed to its loop as the commit lands, the rest claimed,
// attempts recorded in a later commit) lose nothing whenever the process
// dies. Each seeded schedule runs writers against a gateway's file and
// kills the "process" (closes its file, so that nothing more is committed,
// and drops everything it held in memory) several times: after a chosen
// acknowledged write, in the middle of a chosen attempt (the endpoint has
// the request; its record is never written), or after a chosen delay, then
// opens the file again as a new process. Then it checks that every
// acknowledged change reached every endpoint, under one webhook-id each and
// as one event and one delivery per endpoint in the log; that nothing was
// delivered that was not acknowledged; and that no request left before its
// event and delivery were durable. go test -args -merged-seed=N replays one.
func TestMergedStagesLoseNothing(t *testing.T) {
	if *mergedSeed != 0 {
		mergedSchedule(t, *mergedSeed)
		return
	}
	for seed := uint64(1); seed <= uint64(*mergedSeeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { mergedSchedule(t, seed) })
	}
}

const mergedFirm = "frm_merged"

var mergedTenant = practice.Tenant{Firm: mergedFirm}

// proc is one gateway process on the file: its committer, store, records
// and engine.
type proc struct {
	db      *bbolt.DB
	store   *boltstore.Store
	records *demo.Records
	engine  *dispatcher.Engine
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

func openProc(t *testing.T, path string, secrets *sealed.Key) *proc {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := groupcommit.New(db)
	st, err := boltstore.New(db, nil, boltstore.WithSecrets(secrets), boltstore.WithCommitter(c), boltstore.ReclaimLeases())
	if err != nil {
		t.Fatal(err)
	}
	records, err := demo.Open(db, []string{mergedFirm}, demo.WithCommitter(c))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := dispatcher.New(dispatcher.Config{
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Registerer: prometheus.NewRegistry(),
		Timeout:    5 * time.Second,
		// Few slots, so that some deliveries are handed off and others
		// wait in the queue for a claim.
		MaxInFlightPerEndpoint: 2,
		ShutdownGrace:          50 * time.Millisecond,
	}, st.Backends())
	if err != nil {
		t.Fatal(err)
	}
	records.SetChangeLog(dispatcher.NewTxIntake[*bbolt.Tx](eng, st))
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{db: db, store: st, records: records, engine: eng, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		eng.Run(ctx)
	}()
	return p
}

// kill ends the process as SIGKILL would, as far as the file can tell:
// nothing is committed after the commit under way, and whatever the
// process held in memory (handoffs, claims, leases) is gone with it.
func (p *proc) kill() {
	p.once.Do(func() {
		p.db.Close()
		p.cancel()
		<-p.done
		p.engine.Close()
	})
}

// received is what the endpoints saw.
type received struct {
	mu sync.Mutex
	// ids[endpoint][note] are the webhook-ids of every request.
	ids map[string]map[string][]string
	// early are requests whose event or delivery was not durable yet.
	early []string
	// requests counts every request, for the mid-attempt kill.
	requests int
}

func mergedSchedule(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x43))
	path := filepath.Join(t.TempDir(), "practicegw.db")
	secrets, _ := sealed.Random()
	ctx := context.Background()

	var (
		curMu sync.Mutex
		cur   *proc
		rcv   = &received{ids: map[string]map[string][]string{}}
		// killAt is the request count at which the endpoint's handler kills
		// the process mid-attempt; 0 for none.
		killAt int
	)
	current := func() *proc {
		curMu.Lock()
		defer curMu.Unlock()
		return cur
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var env struct {
			ID   string `json:"id"`
			Data struct {
				Note string `json:"note"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Errorf("webhook body %q: %v", body, err)
		}
		id := r.Header.Get("webhook-id")
		p := current()
		// The request's event and its delivery must be in the file already.
		if _, err := p.store.Event(ctx, id); err != nil && !errors.Is(err, bbolt.ErrDatabaseNotOpen) {
			rcv.mu.Lock()
			rcv.early = append(rcv.early, fmt.Sprintf("%s at %s: %v", id, r.URL.Path, err))
			rcv.mu.Unlock()
		}
		rcv.mu.Lock()
		rcv.requests++
		n := rcv.requests
		m := rcv.ids[r.URL.Path]
		if m == nil {
			m = map[string][]string{}
			rcv.ids[r.URL.Path] = m
		}
		m[env.Data.Note] = append(m[env.Data.Note], id)
		kill := killAt > 0 && n >= killAt
		if kill {
			killAt = 0
		}
		rcv.mu.Unlock()
		if kill {
			// The endpoint has the request; the process dies before it
			// hears the answer, so the attempt is never recorded.
			p.kill()
		}
	}))
	defer srv.Close()

	cur = openProc(t, path, secrets)
	endpoints := []string{"/a", "/b"}
	for _, e := range endpoints {
		if _, _, err := cur.engine.CreateEndpoint(ctx, mergedTenant, dispatcher.EndpointInput{URL: srv.URL + e, Events: []string{"*"}}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := cur.records.List(ctx, mergedTenant, practice.Jobs, practice.Query{Limit: 24})
	if err != nil {
		t.Fatal(err)
	}
	// Each writer moves jobs of its own, each to a stage other than the
	// one it is in, so that every write raises one job.stage_changed.
	stages := map[string]string{}
	var jobs []string
	for _, raw := range page.Items {
		var j struct{ ID, Stage string }
		json.Unmarshal(raw, &j)
		jobs = append(jobs, j.ID)
		stages[j.ID] = j.Stage
	}
	const maxWriters = 6
	if len(jobs) < 2*maxWriters {
		t.Fatalf("%d jobs", len(jobs))
	}

	var ackMu sync.Mutex
	acked := map[string]bool{}
	kills := 2 + rng.IntN(3)
	for phase := 0; phase <= kills; phase++ {
		p := current()
		writers, writes := 1+rng.IntN(maxWriters), 10+rng.IntN(30)
		// How this phase's process dies: after an acknowledged write, in
		// the middle of an attempt, or after a while. The last phase's
		// lives on.
		afterAck := -1
		if phase < kills {
			switch rng.IntN(3) {
			case 0:
				afterAck = rng.IntN(writers * writes)
			case 1:
				rcv.mu.Lock()
				killAt = rcv.requests + 1 + rng.IntN(writers*writes)
				rcv.mu.Unlock()
			case 2:
				d := time.Duration(rng.IntN(20000)) * time.Microsecond
				time.AfterFunc(d, p.kill)
			}
		}
		var wg sync.WaitGroup
		var ackN sync.Mutex
		nAck := 0
		for w := range writers {
			wrng := rand.New(rand.NewPCG(seed, uint64(phase*100+w)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				mine := jobs[2*w : 2*w+2]
				for i := range writes {
					note := fmt.Sprintf("p%d-w%d-%d", phase, w, i)
					job := mine[wrng.IntN(len(mine))]
					stage := "in_progress"
					ackMu.Lock()
					if stages[job] == stage {
						stage = "in_review"
					}
					ackMu.Unlock()
					_, err := p.records.MoveJob(ctx, mergedTenant, job, practice.StageMove{Stage: stage, Note: note})
					if err != nil {
						return // the process is dead: this write was not acknowledged
					}
					ackMu.Lock()
					acked[note] = true
					stages[job] = stage
					ackMu.Unlock()
					ackN.Lock()
					nAck++
					kill := nAck-1 == afterAck
					ackN.Unlock()
					if kill {
						p.kill()
					}
				}
			}()
		}
		wg.Wait()
		rcv.mu.Lock()
		killAt = 0 // a mid-attempt kill not reached dies with its phase
		rcv.mu.Unlock()
		if phase < kills {
			p.kill()
			curMu.Lock()
			cur = openProc(t, path, secrets)
			curMu.Unlock()
		}
	}
	defer current().kill()

	// Every acknowledged change reaches every endpoint.
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing := 0
		rcv.mu.Lock()
		for note := range acked {
			for _, e := range endpoints {
				if len(rcv.ids[e][note]) == 0 {
					missing++
				}
			}
		}
		rcv.mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			p := current()
			n, _ := p.store.Backlog(ctx)
			eps, _ := p.store.Endpoints(ctx, mergedTenant)
			states := map[string]int{}
			for _, ep := range eps {
				page, _ := p.store.Deliveries(ctx, dispatcher.DeliveryQuery{EndpointID: ep.ID, Limit: dispatcher.MaxLimit})
				for _, d := range page.Deliveries {
					states[string(d.State)+fmt.Sprint(len(d.Attempts))]++
				}
			}
			evp, everr := p.store.Events(ctx, dispatcher.EventQuery{Tenant: mergedTenant, Limit: 5})
			t.Fatalf("seed %d: %d acknowledged changes never reached an endpoint (backlog %d, %d endpoints, first pages' states %v, events %d %v)", seed, missing, n, len(eps), states, len(evp.Events), everr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, e := range rcv.early {
		t.Errorf("seed %d: a request left before its event was durable: %s", seed, e)
	}
	dups := 0
	for _, e := range endpoints {
		for note, ids := range rcv.ids[e] {
			if !acked[note] {
				t.Errorf("seed %d: %s received %q, a change never acknowledged", seed, e, note)
			}
			for _, id := range ids[1:] {
				if id != ids[0] {
					t.Errorf("seed %d: %s received %q under webhook-ids %s and %s", seed, e, note, ids[0], id)
				}
			}
			dups += len(ids) - 1
		}
	}
	checkLog(t, seed, current(), len(acked), len(endpoints))
	t.Logf("seed %d: %d kills, %d acknowledged changes, %d requests, %d repeated after a kill", seed, kills, len(acked), rcv.requests, dups)
}

// checkLog checks the webhook log: one event per acknowledged change, and
// one delivery of each to every endpoint, delivered.
func checkLog(t *testing.T, seed uint64, p *proc, changes, endpoints int) {
	t.Helper()
	ctx := context.Background()
	events := map[string]bool{}
	for cursor := ""; ; {
		page, err := p.store.Events(ctx, dispatcher.EventQuery{Tenant: mergedTenant, Cursor: cursor, Limit: dispatcher.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Events {
			events[ev.ID] = true
		}
		if !page.HasMore {
			break
		}
		cursor = page.Next
	}
	if len(events) != changes {
		t.Errorf("seed %d: %d events in the log for %d acknowledged changes", seed, len(events), changes)
	}
	eps, err := p.store.Endpoints(ctx, mergedTenant)
	if err != nil || len(eps) != endpoints {
		t.Fatalf("endpoints: %v, %v", eps, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, ep := range eps {
		for {
			seen, delivered := map[string]bool{}, 0
			for cursor := ""; ; {
				page, err := p.store.Deliveries(ctx, dispatcher.DeliveryQuery{EndpointID: ep.ID, Cursor: cursor, Limit: dispatcher.MaxLimit})
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range page.Deliveries {
					if seen[d.EventID] {
						t.Errorf("seed %d: event %s has two deliveries to %s", seed, d.EventID, ep.ID)
					}
					seen[d.EventID] = true
					if d.State == dispatcher.StateDelivered {
						delivered++
					}
				}
				if !page.HasMore {
					break
				}
				cursor = page.Next
			}
			if len(seen) != changes {
				t.Errorf("seed %d: %d deliveries to %s for %d events", seed, len(seen), ep.ID, changes)
			}
			// The last attempts' records may still be on their way.
			if delivered == changes || time.Now().After(deadline) {
				if delivered != changes {
					t.Errorf("seed %d: %d of %d deliveries to %s recorded delivered", seed, delivered, changes, ep.ID)
				}
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
