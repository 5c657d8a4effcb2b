package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"crypto/rand"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/adapters/demo"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	boltstore "github.com/practicegw/practicegw/store/bolt"
)

const firm = "frm_bench"

var tenant = practice.Tenant{Firm: firm}

// engineConfig is the production configuration but for the address
// policy: the receivers are on loopback.
func engineConfig() dispatcher.Config {
	return dispatcher.Config{
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Registerer: prometheus.NewRegistry(),
	}
}

// gatewayDB is the gateway's embedded database with the demo records, as
// the default Caddyfile opens it.
type gatewayDB struct {
	dir     string
	db      *bolt.DB
	records *demo.Records
}

func openGatewayDB() (*gatewayDB, error) {
	dir, err := os.MkdirTemp("", "practicegw-bench-")
	if err != nil {
		return nil, err
	}
	db, err := bolt.Open(filepath.Join(dir, "practicegw.db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	records, err := demo.Open(db, []string{firm})
	if err != nil {
		db.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return &gatewayDB{dir: dir, db: db, records: records}, nil
}

func (g *gatewayDB) create(ctx context.Context, name string) (string, error) {
	raw, err := g.records.CreateClient(ctx, tenant, practice.ClientInput{Name: &name})
	if err != nil {
		return "", err
	}
	var c struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return "", err
	}
	return c.ID, nil
}

func (g *gatewayDB) close() {
	g.db.Close()
	os.RemoveAll(g.dir)
}

// syntheticChange creates a client that no write path made.
func syntheticChange() practice.Change {
	id := strings.ToLower(rand.Text())[:16]
	return practice.Change{
		ID: "chg_" + id, Firm: firm, Kind: practice.Clients, ResourceID: "cli_" + id,
		After:      json.RawMessage(`{"id":"cli_` + id + `","object":"client","name":"Backlog & Co"}`),
		OccurredAt: time.Now().UTC(),
	}
}

// embedded is the default Caddyfile's pipeline: API writes, the outbox and
// the dispatcher's state in one bbolt file, drained and delivered in
// process.
type embedded struct {
	*gatewayDB
	eng    *dispatcher.Engine
	mem    *memOutbox
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func openEmbedded(ctx context.Context) (pipeline, error) {
	g, err := openGatewayDB()
	if err != nil {
		return nil, err
	}
	secrets, _ := sealed.Random()
	st, err := boltstore.New(g.db, nil, boltstore.WithSecrets(secrets))
	if err != nil {
		g.close()
		return nil, err
	}
	eng, err := dispatcher.New(engineConfig(), st.Backends())
	if err != nil {
		g.close()
		return nil, err
	}
	return &embedded{gatewayDB: g, eng: eng, mem: newMemOutbox()}, nil
}

func (e *embedded) endpoint(ctx context.Context, url string) error {
	_, _, err := e.eng.CreateEndpoint(ctx, tenant, dispatcher.EndpointInput{URL: url, Events: []string{"*"}})
	return err
}

func (e *embedded) preload(_ context.Context, n int) ([]string, error) {
	ids := make([]string, n)
	for i := range n {
		c := syntheticChange()
		e.mem.add(c)
		ids[i] = c.ResourceID
	}
	return ids, nil
}

func (e *embedded) start(ctx context.Context) {
	ctx, e.cancel = context.WithCancel(ctx)
	for _, run := range []func(context.Context) error{
		e.eng.Run,
		func(ctx context.Context) error { return e.eng.DrainOutbox(ctx, e.records) },
		func(ctx context.Context) error { return e.eng.DrainOutbox(ctx, e.mem) },
	} {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if err := run(ctx); err != nil {
				fmt.Println("embedded pipeline:", err)
			}
		}()
	}
}

func (e *embedded) close() {
	if e.cancel != nil {
		e.cancel()
	}
	e.wg.Wait()
	e.eng.Close()
	e.gatewayDB.close()
}

// memOutbox is an outbox in memory for the synthetic backlog.
type memOutbox struct {
	mu      sync.Mutex
	entries []practice.OutboxEntry
	seq     uint64
	signal  chan struct{}
}

func newMemOutbox() *memOutbox { return &memOutbox{signal: make(chan struct{}, 1)} }

func (o *memOutbox) add(c practice.Change) {
	o.mu.Lock()
	o.seq++
	o.entries = append(o.entries, practice.OutboxEntry{Seq: o.seq, Change: c})
	o.mu.Unlock()
	select {
	case o.signal <- struct{}{}:
	default:
	}
}

func (o *memOutbox) ReadOutbox(after uint64, max int) ([]practice.OutboxEntry, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []practice.OutboxEntry
	for _, e := range o.entries {
		if e.Seq > after && len(out) < max {
			out = append(out, e)
		}
		if len(out) == max {
			break
		}
	}
	return out, nil
}

func (o *memOutbox) DeleteOutbox(upTo uint64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := 0
	for i < len(o.entries) && o.entries[i].Seq <= upTo {
		i++
	}
	o.entries = o.entries[i:]
	return nil
}

func (o *memOutbox) OutboxSignal() <-chan struct{} { return o.signal }
