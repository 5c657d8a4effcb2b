package firms

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	bbolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	_ "github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	_ "github.com/practicegw/practicegw/adapters/xero"
	_ "github.com/practicegw/practicegw/adapters/xpm"
	"github.com/practicegw/practicegw/adminapi"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	boltstore "github.com/practicegw/practicegw/store/bolt"
	"github.com/practicegw/practicegw/store/connection"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// fakeConnections keeps connections in memory as the stores do: listed
// oldest first, updated only at the version read.
type fakeConnections struct {
	mu    sync.Mutex
	byID  map[string]connection.Connection
	order []string
}

func newFakeConnections() *fakeConnections {
	return &fakeConnections{byID: map[string]connection.Connection{}}
}

func (f *fakeConnections) create(c connection.Connection) connection.Connection {
	f.mu.Lock()
	defer f.mu.Unlock()
	c.Version = 1
	f.byID[c.ID] = c
	f.order = append(f.order, c.ID)
	return c
}

func (f *fakeConnections) Connections(_ context.Context, firm string) ([]connection.Connection, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []connection.Connection
	for _, id := range f.order {
		if c := f.byID[id]; firm == "" || c.Firm == firm {
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakeConnections) Connection(_ context.Context, id string) (connection.Connection, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.byID[id]
	if !ok {
		return c, connection.ErrNotFound
	}
	return c, nil
}

func (f *fakeConnections) UpdateConnection(_ context.Context, c connection.Connection, version int64) (connection.Connection, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.byID[c.ID]
	if !ok {
		return c, connection.ErrNotFound
	}
	if cur.Version != version {
		return cur, connection.ErrVersion
	}
	c.Version = version + 1
	f.byID[c.ID] = c
	return c, nil
}

// change rewrites a connection as an administrator's action would.
func (f *fakeConnections) change(t *testing.T, id string, fn func(*connection.Connection)) {
	t.Helper()
	for {
		c, err := f.Connection(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		fn(&c)
		if _, err := f.UpdateConnection(context.Background(), c, c.Version); !errors.Is(err, connection.ErrVersion) {
			if err != nil {
				t.Fatal(err)
			}
			return
		}
	}
}

// demoRecords stands for the seeded demo records in the tests.
type demoRecords struct{ Demo }

// world is firms' systems behind the Xero and Karbon doubles, a shared
// Redis and the connections' store, and the gateway instances that
// follow it.
type world struct {
	t       *testing.T
	srv     *redistest.Server
	secrets *sealed.Key
	conns   *fakeConnections
	xero    *vendortest.Xero
	karbon  *vendortest.Karbon
	connect *connect.Config
	firms   []string
	// store is the upstream state every instance shares; bolt is the
	// embedded store of a world of one instance, nil on Redis.
	store worldState
	bolt  *boltstore.Store
	// opened counts the instances made: a bbolt file has one.
	opened int
}

// worldState is the upstream state the world's instances share.
type worldState interface {
	Last(ctx context.Context, key string) ([]byte, error)
	Save(ctx context.Context, key string, state []byte) error
}

// worldReadModel is the read model's store the world's instances share.
type worldReadModel interface {
	readmodel.Store
	readmodel.Checkpoints
}

// newWorld is a world on Redis, shared by its instances.
func newWorld(t *testing.T, firms ...string) *world {
	w := newWorldOn(t, firms...)
	w.srv = redistest.Start(t)
	w.store = w.redisStore()
	return w
}

// onEachBackend runs test in a world on each backend a gateway keeps its
// state in: the embedded bbolt store with one instance, and Redis shared
// by n.
func onEachBackend(t *testing.T, n int, firms []string, test func(t *testing.T, w *world, apps []*Runtime)) {
	t.Run("bbolt", func(t *testing.T) {
		w := newBoltWorld(t, firms...)
		test(t, w, []*Runtime{w.instance()})
	})
	t.Run("redis", func(t *testing.T) {
		w := newWorld(t, firms...)
		apps := make([]*Runtime, n)
		for i := range apps {
			apps[i] = w.instance()
		}
		test(t, w, apps)
	})
}

// newBoltWorld is a world of one instance on the embedded bbolt store.
func newBoltWorld(t *testing.T, firms ...string) *world {
	w := newWorldOn(t, firms...)
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, &bbolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if w.bolt, err = boltstore.New(db, nil, boltstore.WithSecrets(w.secrets)); err != nil {
		t.Fatal(err)
	}
	w.store = w.bolt
	return w
}

// readModel is the read model's store the world's instances share.
func (w *world) readModel() worldReadModel {
	if w.bolt != nil {
		return w.bolt.ReadModel()
	}
	return w.store.(*redisstore.Store).ReadModel()
}

func newWorldOn(t *testing.T, firms ...string) *world {
	w := &world{t: t, conns: newFakeConnections(), firms: firms}
	w.secrets, _ = sealed.Random()
	w.xero = vendortest.StartXero(t)
	w.xero.AddLedgerPage(120)
	w.karbon = vendortest.StartKarbon(t)
	// Few enough that two backfills stay within Karbon's 120 calls a
	// minute: the sync reads each client's card.
	for i := range 10 {
		w.karbon.AddContact(vendortest.KarbonContact{ContactKey: fmt.Sprintf("C%03d", i), FirstName: "Ann",
			LastName: fmt.Sprintf("Client%03d", i), ContactType: "Client", Country: "GB"})
	}
	// The app's secrets are placeholders, as an operator configures them.
	t.Setenv("PRACTICEGW_TEST_XERO_WEBHOOK_KEY", "xero-webhook-key")
	w.connect = provisionedConnect(t, fmt.Sprintf(`{"xero":{"client_id":"xero-client","client_secret":"xero-secret",`+
		`"token_url":%q,"base_url":%q,"webhook_key":"{env.PRACTICEGW_TEST_XERO_WEBHOOK_KEY}"},`+
		`"karbon":{"bearer":%q,"base_url":%q}}`,
		w.xero.URL+"/token", strings.TrimSuffix(w.xero.URL, "/api.xro/2.0"), w.karbon.Bearer, w.karbon.URL))
	return w
}

func (w *world) redisStore() *redisstore.Store {
	rdb, err := redisstore.NewClient(w.srv.URL(), redisstore.TLSFiles{}, 5*time.Second)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { rdb.Close() })
	st, err := redisstore.New(rdb, redisstore.Options{Secrets: w.secrets})
	if err != nil {
		w.t.Fatal(err)
	}
	return st
}

// instance is one gateway's runtime: its own Redis client, its own
// firms' systems; on bbolt the one gateway of the file. The first firm's
// block sets every role to demo, the others none; configure changes the
// configuration and dependencies before the runtime is made.
func (w *world) instance(configure ...func(*Config, *Deps)) *Runtime {
	cctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	w.opened++
	cfg := Config{Holder: fmt.Sprintf("gw%d/%d", w.opened, time.Now().UnixNano()), Connects: true}
	for i, id := range w.firms {
		f := Firm{ID: id}
		if i == 0 {
			f.Demo = roles
		}
		cfg.Firms = append(cfg.Firms, f)
	}
	d := Deps{Logger: zap.NewNop(), Budget: upstream.NewLocalBudget(nil), Changes: &countingSink{}, Demo: demoRecords{},
		Connections: w.conns}
	if w.bolt != nil {
		if w.opened > 1 {
			w.t.Fatal("a bbolt file has one gateway")
		}
		d.Store, d.State, d.Notices = w.bolt.ReadModel(), w.bolt, w.bolt
	} else {
		st := w.redisStore()
		d.Store, d.Feed, d.State, d.Notices = st.ReadModel(), st.ReadModel(), st, st
	}
	d.Connected = connect.Modules{Config: w.connect, Context: cctx, Secrets: d.State}
	for _, c := range configure {
		c(&cfg, &d)
	}
	r, err := New(context.Background(), cfg, d)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		r.Stop()
		cancel()
	})
	return r
}

// read is what serves kind k of firm's live records on a.
func read(a *Runtime, firm string, k practice.Kind) practice.Reader {
	s, _ := a.Systems(practice.Tenant{Firm: firm})
	return s.Reader(k)
}

// connectionChecks are a's checks of its connections in /readyz.
func connectionChecks(a *Runtime) []Check {
	var out []Check
	for _, c := range a.Checks(time.Now()) {
		if strings.HasPrefix(c.Name, "connection ") {
			out = append(out, c)
		}
	}
	return out
}

// countingSink takes change records.
type countingSink struct {
	mu sync.Mutex
	n  int
}

func (s *countingSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *countingSink) Publish(context.Context, practice.Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return nil
}

var connectionSeq int

// connectXero is a ledger connection to the Xero double's organisation,
// whose consent saved the double's token.
func (w *world) connectXero(firm string) connection.Connection {
	connectionSeq++
	now := time.Now()
	c := connection.Connection{ID: fmt.Sprintf("con_x%d", connectionSeq), Firm: firm, Role: "ledger", System: "xero",
		Status: connection.Connected, OrganisationID: w.xero.TenantID, Attempt: 1, ConnectedAt: &now}
	w.seedXeroToken(c)
	return w.conns.create(c)
}

func (w *world) seedXeroToken(c connection.Connection) {
	err := oauthtoken.Seed(context.Background(), upstream.Deps{State: w.store}, oauthtoken.Xero,
		upstream.OAuth2Config{ClientID: "xero-client", Connection: c.ID},
		&oauth2.Token{AccessToken: w.xero.Token, RefreshToken: "rt-" + c.ID, Expiry: time.Now().Add(time.Hour)})
	if err != nil {
		w.t.Fatal(err)
	}
}

// connectKarbon is a records connection whose access key was checked
// and sealed.
func (w *world) connectKarbon(firm string) connection.Connection {
	connectionSeq++
	now := time.Now()
	c := connection.Connection{ID: fmt.Sprintf("con_k%d", connectionSeq), Firm: firm, Role: "records", System: "karbon",
		Status: connection.Connected, Attempt: 1, ConnectedAt: &now}
	if err := w.store.Save(context.Background(), connect.SecretKey(c.ID, "access_key"), []byte(w.karbon.AccessKey)); err != nil {
		w.t.Fatal(err)
	}
	return w.conns.create(c)
}

// stored is what the shared store keeps of a firm's kinds.
func (w *world) stored(firm string, kinds []practice.Kind) int {
	n := 0
	err := w.readModel().Load(context.Background(), firm, func(u readmodel.Update) error {
		if slices.Contains(kinds, u.Kind) {
			n++
		}
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

// step is one look at the store by a.
func step(t *testing.T, a *Runtime) {
	t.Helper()
	if err := a.applyConnections(context.Background()); err != nil {
		t.Fatalf("following the connections: %v", err)
	}
}

// checkServes checks that a serves exactly what the store's connections
// say: each role with a connected or needs_reconnect connection by its
// system, opened for its attempt and organisation, its sync running only
// while connected; a role being reconnected by the copy held, failing,
// with writes refused; a role whose newest connection is disconnected or
// never connected answers not connected; a role with none the demo
// records where the firm's block sets it to demo, else not connected.
func (w *world) checkServes(name string, a *Runtime) {
	w.t.Helper()
	ctx := context.Background()
	list, _ := w.conns.Connections(ctx, "")
	want := wantedConnections(list)
	a.follow.mu.Lock()
	defer a.follow.mu.Unlock()
	for _, firm := range w.firms {
		b := a.firms[firm]
		tenant := practice.Tenant{Firm: firm}
		said := map[string]adminapi.RoleView{}
		for _, v := range a.Roles(firm) {
			said[v.Role] = v
		}
		for _, role := range roles {
			kind := firmsystem.Kinds(role)[0]
			wr := want[firm][role]
			cur := b.table.Load()
			open := cur.conns[role]
			r := b.reader(kind)
			notConnected := func() {
				w.t.Helper()
				if _, err := r.List(ctx, tenant, kind, practice.Query{}); !errors.Is(err, practice.ErrNotConnected) {
					w.t.Fatalf("%s %s %s: a read: %v, want not connected", name, firm, role, err)
				}
			}
			// What the contract says, from the connection alone.
			how := servedByNone
			switch c := wr.conn; {
			case c == nil:
			case c.Status == connection.Connected || c.Status == connection.NeedsReconnect:
				how = servedBySystem
			case (c.Status == connection.Pending || c.Status == connection.ChooseOrganisation) && c.ConnectedAt != nil:
				how = servedByHeldCopy
			default:
				how = servedNotConnected
			}
			// practicegw sync status says what the reads do.
			source := map[serving]string{servedBySystem: adminapi.SourceConnection, servedByHeldCopy: adminapi.SourceConnection,
				servedNotConnected: adminapi.SourceNotConnected, servedByNone: adminapi.SourceNotConnected}[how]
			if how == servedByNone && b.demo[role] {
				source = adminapi.SourceDemo
			}
			if v := said[role]; v.Source != source || wr.conn != nil && (v.Connection != wr.conn.ID || v.Status != string(wr.conn.Status)) {
				w.t.Fatalf("%s %s %s: sync status says %+v, want %s (connection %+v)", name, firm, role, v, source, wr.conn)
			}
			switch how {
			case servedBySystem, servedByHeldCopy:
				if open == nil || !sameOpening(open, *wr.conn, how, b.connKinds(role, cur.engagements)) {
					w.t.Fatalf("%s %s %s: serves %v, want %s attempt %d (held %t)", name, firm, role, open, wr.conn.ID, wr.conn.Attempt, how == servedByHeldCopy)
				}
				if open.running() != (wr.conn.Status == connection.Connected) {
					w.t.Fatalf("%s %s %s: sync running %t with status %s", name, firm, role, open.running(), wr.conn.Status)
				}
				if r != practice.Reader(open.model) {
					w.t.Fatalf("%s %s %s: %s read from %T, not the connection's model", name, firm, role, kind, r)
				}
				if wr.conn.Status == connection.Connected {
					continue
				}
				if f, _ := open.model.Freshness(kind); f.State != readmodel.StateFailing || f.Reason == "" || f.Reason != open.waitReason() {
					w.t.Fatalf("%s %s %s: %s (%q) while %s, want failing with the connection's reason", name, firm, role, f.State, f.Reason, wr.conn.Status)
				}
				if role == "records" {
					if _, err := b.clients().CreateClient(ctx, tenant, practice.ClientInput{}); !errors.Is(err, practice.ErrReconnecting) {
						w.t.Fatalf("%s %s %s: a write while %s: %v, want reconnecting", name, firm, role, wr.conn.Status, err)
					}
				}
			case servedNotConnected:
				if open != nil {
					w.t.Fatalf("%s %s %s: %s still open while %s", name, firm, role, open.conn.ID, wr.conn.Status)
				}
				notConnected()
			default:
				if open != nil {
					w.t.Fatalf("%s %s %s: %s open with no connection", name, firm, role, open.conn.ID)
				}
				if !b.demo[role] {
					notConnected()
				} else if _, ok := r.(demoRecords); !ok {
					w.t.Fatalf("%s %s %s: read from %T, want the demo records", name, firm, role, r)
				}
			}
		}
	}
}

// TestInstancesFollowTheConnections drives connections through many
// seeded interleavings of connects, refused grants, reconnects and
// disconnects of two firms, looked at by three instances in any order.
// After each quiet step (every instance has looked), every instance serves
// exactly the live connections, no sync runs for one that is not live,
// and a purged copy is gone from the shared store.
func TestInstancesFollowTheConnections(t *testing.T) {
	seeds := 12
	if testing.Short() {
		seeds = 3
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			w := newWorld(t, "frm_acme", "frm_beta")
			apps := []*Runtime{w.instance(), w.instance(), w.instance()}
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			var closed []*system
			for op := range 14 {
				a := apps[rng.IntN(len(apps))]
				firm := w.firms[rng.IntN(len(w.firms))]
				list, _ := w.conns.Connections(context.Background(), firm)
				want := wantedConnections(list)[firm]
				role := []string{"records", "ledger"}[rng.IntN(2)]
				cur := want[role].conn
				consented := func(c *connection.Connection) {
					now := time.Now()
					c.Status, c.Reason, c.Choices, c.ConnectedAt = connection.Connected, "", nil, &now
				}
				switch {
				case cur == nil || cur.Status == connection.Disconnected:
					var c connection.Connection
					if role == "ledger" {
						c = w.connectXero(firm)
					} else {
						c = w.connectKarbon(firm)
					}
					if rng.IntN(3) == 0 {
						// Its first consent is still awaited.
						w.conns.change(t, c.ID, func(c *connection.Connection) {
							c.Status, c.Reason, c.ConnectedAt = connection.Pending, "waiting for consent", nil
						})
					}
				case rng.IntN(5) == 0:
					// The vendor changes under the syncs.
					id := fmt.Sprintf("0f1e2d3c-0000-4000-8000-%012d", op)
					w.xero.AddInvoice(vendortest.XeroInvoice{InvoiceID: id, InvoiceNumber: "INV-" + id[24:], Status: "AUTHORISED",
						ContactID: "a3675fc4-f8dd-4f03-ba5b-f1870566bcd7", ContactName: "Barney Rubble", Date: time.Now(),
						DueDate: time.Now(), Total: "10.00", AmountDue: "10.00", CurrencyCode: "GBP", Updated: time.Now()})
				case cur.Status == connection.Connected && rng.IntN(3) == 0:
					// The vendor refuses the grant, as the adapter on one
					// instance hears it.
					a.grantRefused(*cur)("the vendor refused the connection's grant")
				case cur.Live() && rng.IntN(2) == 0:
					// The administrator reconnects: a new consent is
					// awaited.
					w.conns.change(t, cur.ID, func(c *connection.Connection) {
						c.Status, c.Reason, c.Attempt = connection.Pending, "reconnecting", c.Attempt+1
					})
				case cur.Status == connection.Pending && cur.System == "xero" && cur.ConnectedAt != nil && rng.IntN(3) == 0:
					// The new consent reaches another organisation too.
					w.conns.change(t, cur.ID, func(c *connection.Connection) {
						c.Status, c.Reason = connection.ChooseOrganisation, "choose the organisation to connect"
						c.Choices = []connection.Organisation{{ID: c.OrganisationID, Name: "Demo"}, {ID: "another", Name: "Another"}}
					})
				case (cur.Status == connection.Pending || cur.Status == connection.ChooseOrganisation) && rng.IntN(3) != 0:
					// The consent is given (the same organisation chosen).
					if cur.System == "xero" {
						w.seedXeroToken(*cur)
					}
					w.conns.change(t, cur.ID, consented)
				default:
					w.conns.change(t, cur.ID, func(c *connection.Connection) { c.Status = connection.Disconnected })
					gone, _ := w.conns.Connection(context.Background(), cur.ID)
					if err := a.Purge(context.Background(), gone); err != nil {
						t.Fatal(err)
					}
				}
				// Some instances look now, the rest later.
				for _, i := range rng.Perm(len(apps))[:rng.IntN(len(apps)+1)] {
					step(t, apps[i])
				}
				if rng.IntN(2) == 0 {
					continue
				}
				for _, b := range apps {
					for _, f := range b.firms {
						closed = append(closed, f.connections()...)
					}
				}
				for i, b := range apps {
					step(t, b)
					w.checkServes(fmt.Sprintf("op %d instance %d", op, i), b)
				}
				for _, c := range closed {
					if c.running() && !slices.Contains(allOpen(apps), c) {
						t.Fatalf("op %d: %s's sync runs after it was closed", op, c.conn.ID)
					}
				}
				for _, firm := range w.firms {
					list, _ := w.conns.Connections(context.Background(), firm)
					for role, wr := range wantedConnections(list)[firm] {
						if wr.conn.Status == connection.Disconnected {
							if n := w.stored(firm, firmsystem.Kinds(role)); n != 0 {
								t.Fatalf("op %d: %s's disconnected %s keep %d records in the store", op, firm, role, n)
							}
						}
					}
				}
			}
		})
	}
}

// allOpen are the connections open on any of apps.
func allOpen(apps []*Runtime) []*system {
	var out []*system
	for _, a := range apps {
		for _, b := range a.firms {
			out = append(out, b.connections()...)
		}
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// backfilled reports whether c's syncs on a have backfilled every kind.
func backfilled(a *Runtime, c connection.Connection) bool {
	_, syncs := a.Use(c)
	if len(syncs) == 0 {
		return false
	}
	for _, s := range syncs {
		if s.State != readmodel.StateLive {
			return false
		}
	}
	return true
}

// checkpointBackfilled reports whether the saved checkpoint of a firm's
// role says every kind it syncs is backfilled.
func (w *world) checkpointBackfilled(firm, role string) bool {
	raw, err := w.readModel().Checkpoint(context.Background(), readmodel.SyncCheckpoints(firm, role)[0])
	if err != nil || raw == nil {
		return false
	}
	var p struct {
		Kinds map[string]struct {
			Backfilled bool `json:"backfilled"`
		} `json:"kinds"`
	}
	if json.Unmarshal(raw, &p) != nil || len(p.Kinds) == 0 {
		return false
	}
	for _, k := range p.Kinds {
		if !k.Backfilled {
			return false
		}
	}
	return true
}

// checkpointSavedAfter reports whether the sync of a firm's role saved its
// checkpoint after t, as holder: it has run a round since.
func (w *world) checkpointSavedAfter(firm, role, holder string, t time.Time) bool {
	raw, err := w.readModel().Checkpoint(context.Background(), readmodel.SyncCheckpoints(firm, role)[0])
	if err != nil || raw == nil {
		return false
	}
	var p struct {
		Holder  string    `json:"holder"`
		SavedAt time.Time `json:"saved_at"`
	}
	_ = json.Unmarshal(raw, &p)
	return p.Holder == holder && p.SavedAt.After(t)
}

// A refused grant turns the connection needs_reconnect: the sync stops,
// the copy is still served and says it is failing, /readyz says the
// status without the reason. A reconnect reopens the system with the new
// token and resumes the sync from its checkpoint: no new backfill.
func TestReconnectResumesWithoutBackfill(t *testing.T) {
	w := newWorld(t, "frm_acme")
	w.xero.AddLedgerPage(1000) // pages of them to backfill
	a := w.instance()
	c := w.connectXero("frm_acme")
	step(t, a)
	waitFor(t, "the backfill", func() bool { return backfilled(a, c) })
	// Reads are told the backfill is over before its checkpoint is saved:
	// wait for it, or the pause below could cut the save.
	waitFor(t, "the backfill's checkpoint", func() bool { return w.checkpointBackfilled("frm_acme", "ledger") })
	backfill := w.xero.Faults.Hits()
	if backfill < 5 {
		t.Fatalf("the backfill made %d calls, want pages of them", backfill)
	}
	acme := practice.Tenant{Firm: "frm_acme"}
	model := read(a, "frm_acme", practice.Invoices)

	// The adapter's words (the vendor's code) go to the log; the
	// connection keeps a sentence for its administrator.
	const reason = "Xero no longer accepts this connection's grant; reconnect it."
	a.grantRefused(c)("xero refused the refresh token (invalid_grant): the connection must be reconnected")
	a.grantRefused(c)("again") // already needs_reconnect: nothing more
	got, _ := w.conns.Connection(context.Background(), c.ID)
	if got.Status != connection.NeedsReconnect || got.Reason != reason || got.Version != c.Version+1 {
		t.Fatalf("after a refused grant: %s %q version %d, want needs_reconnect %q version %d", got.Status, got.Reason, got.Version, reason, c.Version+1)
	}
	step(t, a)
	open := a.firms["frm_acme"].table.Load().conns["ledger"]
	if open.running() {
		t.Fatal("the sync still runs after its grant was refused")
	}
	page, err := model.List(context.Background(), acme, practice.Invoices, practice.Query{Limit: 1000})
	if err != nil || len(page.Items) != 1000 {
		t.Fatalf("reads while paused: %d invoices, %v; want the copy's 1000", len(page.Items), err)
	}
	if f, _ := open.model.Freshness(practice.Invoices); f.State != readmodel.StateFailing || !f.Backfilled || f.Reason != reason {
		t.Errorf("while paused, invoices say %+v, want failing, backfilled and the connection's reason", f)
	}
	if _, syncs := a.Use(got); len(syncs) != 1 || syncs[0].State != "paused" {
		t.Errorf("the connection's view while paused: %+v", syncs)
	}
	checks := connectionChecks(a)
	if len(checks) != 1 || checks[0].Name != "connection xero/frm_acme" || checks[0].OK || checks[0].Detail != "needs_reconnect" {
		t.Errorf("readiness while paused: %+v", checks)
	}

	// The administrator consents again: a new token, which the double
	// now wants.
	w.xero.Token = "xero-token-2"
	err = oauthtoken.Seed(context.Background(), upstream.Deps{State: w.store}, oauthtoken.Xero,
		upstream.OAuth2Config{ClientID: "xero-client", Connection: c.ID},
		&oauth2.Token{AccessToken: "xero-token-2", RefreshToken: "rt-2", Expiry: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	w.conns.change(t, c.ID, func(c *connection.Connection) { c.Status, c.Reason, c.Attempt = connection.Connected, "", 2 })
	before, reconnected := w.xero.Faults.Hits(), time.Now()
	step(t, a)
	waitFor(t, "the resumed sync's first round, live", func() bool {
		return w.checkpointSavedAfter("frm_acme", "ledger", a.cfg.Holder, reconnected) && backfilled(a, c)
	})
	if calls := w.xero.Faults.Hits() - before; calls >= backfill {
		t.Errorf("the resumed sync made %d calls, as many as a backfill (%d)", calls, backfill)
	}
	// The reopened system reads with the new token: a webhook's invoice
	// is read from Xero and kept.
	w.xero.AddInvoice(vendortest.XeroInvoice{InvoiceID: "0f1e2d3c-0000-4000-8000-000000000001", InvoiceNumber: "INV-NEW",
		Status: "AUTHORISED", ContactID: "a3675fc4-f8dd-4f03-ba5b-f1870566bcd7", ContactName: "Barney Rubble",
		Date: time.Now(), DueDate: time.Now(), Total: "10.00", AmountDue: "10.00", CurrencyCode: "GBP", Updated: time.Now()})
	body := vendortest.XeroWebhook(w.xero.TenantID, time.Now(), "0f1e2d3c-0000-4000-8000-000000000001")
	if status := postXero(t, a, body, vendortest.SignXero("xero-webhook-key", body)); status != 200 {
		t.Fatalf("webhook after the reconnect: %d", status)
	}
	reader := read(a, "frm_acme", practice.Invoices)
	if _, err := reader.Get(context.Background(), acme, practice.Invoices, "inv_0f1e2d3c-0000-4000-8000-000000000001"); err != nil {
		t.Errorf("the webhook's invoice after the reconnect: %v", err)
	}
	if checks := connectionChecks(a); len(checks) != 1 || !checks[0].OK || checks[0].Detail != "connected" {
		t.Errorf("readiness after the reconnect: %+v", checks)
	}
}

func postXero(t *testing.T, a *Runtime, body []byte, signature string) int {
	t.Helper()
	h, ok := a.ConnectionWebhook("xero", "")
	if !ok {
		t.Fatal("no Xero webhook route")
	}
	r := httptest.NewRequest(http.MethodPost, "/connect/webhooks/xero", bytes.NewReader(body))
	r.Header.Set("x-xero-signature", signature)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec.Code
}

// Xero's webhooks reach one route for every organisation: a delivery
// wrongly signed is 401 (Xero's intent-to-receive check), one rightly
// signed with no events is 200, and each event goes to the connections
// whose organisation it names, of any firm, and to no other.
func TestXeroWebhooksAreDispatchedByOrganisation(t *testing.T) {
	w := newWorld(t, "frm_acme", "frm_beta")
	a := w.instance()
	acme, beta := w.connectXero("frm_acme"), w.connectXero("frm_beta")
	// frm_beta's organisation is another one than the double serves.
	w.conns.change(t, beta.ID, func(c *connection.Connection) { c.OrganisationID = "0b0b0b0b-0000-4000-8000-00000000beta" })
	step(t, a)
	waitFor(t, "the backfill", func() bool { return backfilled(a, acme) })
	key := "xero-webhook-key"
	intent := vendortest.XeroWebhook(w.xero.TenantID, time.Now())
	if got := postXero(t, a, intent, vendortest.SignXero("another key", intent)); got != http.StatusUnauthorized {
		t.Errorf("a wrong signature: %d, want 401", got)
	}
	if got := postXero(t, a, intent, ""); got != http.StatusUnauthorized {
		t.Errorf("no signature: %d, want 401", got)
	}
	if got := postXero(t, a, intent, vendortest.SignXero(key, intent)); got != http.StatusOK {
		t.Errorf("the intent to receive: %d, want 200", got)
	}
	id := "0f1e2d3c-0000-4000-8000-000000000002"
	w.xero.AddInvoice(vendortest.XeroInvoice{InvoiceID: id, InvoiceNumber: "INV-HOOK", Status: "AUTHORISED",
		ContactID: "a3675fc4-f8dd-4f03-ba5b-f1870566bcd7", ContactName: "Barney Rubble", Date: time.Now(), DueDate: time.Now(),
		Total: "10.00", AmountDue: "10.00", CurrencyCode: "GBP", Updated: time.Now()})
	// An organisation no firm connected: acknowledged, read by no one.
	other := vendortest.XeroWebhook("99999999-0000-4000-8000-000000000000", time.Now(), id)
	if got := postXero(t, a, other, vendortest.SignXero(key, other)); got != http.StatusOK {
		t.Errorf("another organisation's event: %d, want 200", got)
	}
	get := func(firm string) error {
		_, err := read(a, firm, practice.Invoices).Get(context.Background(), practice.Tenant{Firm: firm}, practice.Invoices, "inv_"+id)
		return err
	}
	if err := get("frm_acme"); !errors.Is(err, practice.ErrNotFound) {
		t.Fatalf("after another organisation's event, the invoice is %v, want not found", err)
	}
	hook := vendortest.XeroWebhook(w.xero.TenantID, time.Now(), id)
	if got := postXero(t, a, hook, vendortest.SignXero(key, hook)); got != http.StatusOK {
		t.Fatalf("the organisation's event: %d, want 200", got)
	}
	if err := get("frm_acme"); err != nil {
		t.Errorf("the event's invoice at the firm that connected its organisation: %v", err)
	}
	if _, ok := a.ConnectionWebhook("xero", acme.ID); ok {
		t.Error("a Xero route per connection: Xero has one for the app")
	}
}

// Xero's webhook route is served only when the Xero app has a webhook
// key: without one every delivery would be refused unchecked, where the
// API answers an unknown route with the contract's body.
// provisionedConnect is a connect block from its JSON, its apps loaded as
// the app loads them.
func provisionedConnect(t *testing.T, raw string) *connect.Config {
	t.Helper()
	c := connectConfig(t, raw)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := c.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestXeroWebhookRouteNeedsTheAppsKey(t *testing.T) {
	t.Setenv("TEST_XERO_HOOK_KEY", "from-the-environment")
	for _, tt := range []struct {
		cfg  *connect.Config
		want bool
	}{
		{nil, false},
		{provisionedConnect(t, `{}`), false},
		{provisionedConnect(t, `{"karbon":{"bearer":"b"}}`), false},
		{provisionedConnect(t, `{"xero":{"client_id":"c","client_secret":"s"}}`), false},
		{provisionedConnect(t, `{"xero":{"client_id":"c","client_secret":"s","webhook_key":"{env.TEST_XERO_HOOK_KEY_UNSET}"}}`), false},
		{provisionedConnect(t, `{"xero":{"client_id":"c","client_secret":"s","webhook_key":"{env.TEST_XERO_HOOK_KEY}"}}`), true},
	} {
		a, err := New(context.Background(), Config{}, Deps{Connected: connect.Modules{Config: tt.cfg}})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := a.ConnectionWebhook("xero", ""); ok != tt.want {
			t.Errorf("connect %+v: route %v, want %v", tt.cfg, ok, tt.want)
		}
	}
}

// A Karbon connection's webhooks reach its own adapter; an unknown or
// disconnected connection has no route.
func TestKarbonWebhookRouteIsTheLiveConnections(t *testing.T) {
	w := newWorld(t, "frm_acme")
	a := w.instance()
	c := w.connectKarbon("frm_acme")
	step(t, a)
	if h, ok := a.ConnectionWebhook("karbon", c.ID); !ok || h == nil {
		t.Fatal("no route for a live Karbon connection")
	}
	if _, ok := a.ConnectionWebhook("karbon", "con_unknown"); ok {
		t.Error("a route for an unknown connection")
	}
	w.conns.change(t, c.ID, func(c *connection.Connection) { c.Status = connection.Disconnected })
	step(t, a)
	if _, ok := a.ConnectionWebhook("karbon", c.ID); ok {
		t.Error("a route for a disconnected connection")
	}
}

// What a firm gives (a tenant id, an access key) reaches the module as it
// is: never expanded as one of the gateway's placeholders.
func TestConnectionConfigKeepsWhatTheFirmGaveLiteral(t *testing.T) {
	t.Setenv("PRACTICEGW_TEST_SECRET", "gateway-secret")
	w := newWorld(t, "frm_acme")
	a := w.instance()
	c := connection.Connection{ID: "con_lit", Firm: "frm_acme", Role: "records", System: "karbon", Status: connection.Connected, Attempt: 1}
	if err := w.store.Save(context.Background(), connect.SecretKey(c.ID, "access_key"), []byte("{env.PRACTICEGW_TEST_SECRET}")); err != nil {
		t.Fatal(err)
	}
	val, err := a.d.Connected.Module(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(val)
	if strings.Contains(string(out), "gateway-secret") || !strings.Contains(string(out), `"access_key":"{env.PRACTICEGW_TEST_SECRET}"`) {
		t.Errorf("the provisioned module: %s", out)
	}
	for _, system := range []string{"xero", "xpm", "karbon", "sharepoint", "onedrive", "google_drive", "dropbox"} {
		c := connection.Connection{ID: "con_" + system, Firm: "frm_acme", System: system, OrganisationID: "tenant"}
		c.Role = map[string]string{"xero": "ledger", "xpm": "records", "karbon": "records"}[system]
		if c.Role == "" {
			c.Role = "documents"
		}
		if _, err := (&connect.Config{}).ModuleConfig(context.Background(), a.d.State, c); err == nil {
			t.Errorf("%s without its app in the connect block: no error", system)
		}
	}
}

// A disconnect purges the copy from the shared store (records and
// checkpoints, with no change record), every instance then answers the
// role not connected, and a later connection of the same system
// backfills afresh.
func TestPurgeDropsTheCopyAndANewConnectionBackfills(t *testing.T) {
	w := newWorld(t, "frm_acme")
	a, b := w.instance(), w.instance()
	c := w.connectKarbon("frm_acme")
	step(t, a)
	step(t, b)
	waitFor(t, "the backfill", func() bool { return backfilled(a, c) && backfilled(b, c) })
	records := firmsystem.Kinds("records")
	if n := w.stored("frm_acme", records); n != 10 {
		t.Fatalf("the store keeps %d records after the backfill, want the double's 10 clients", n)
	}
	if last, syncs := a.Use(c); last == nil || len(syncs) != 1 || syncs[0].State != readmodel.StateLive || syncs[0].Role != "records" {
		t.Errorf("the connection's view: last success %v, syncs %+v", last, syncs)
	}
	backfill := len(w.karbon.Requests())
	changed := a.d.Changes.(*countingSink).count() + b.d.Changes.(*countingSink).count()

	w.conns.change(t, c.ID, func(c *connection.Connection) { c.Status = connection.Disconnected })
	gone, _ := w.conns.Connection(context.Background(), c.ID)
	for range 2 {
		if err := a.Purge(context.Background(), gone); err != nil {
			t.Fatalf("purge: %v", err)
		}
	}
	if n := w.stored("frm_acme", records); n != 0 {
		t.Errorf("the store keeps %d records after the purge", n)
	}
	for _, name := range readmodel.SyncCheckpoints("frm_acme", "records") {
		if raw, err := w.readModel().Checkpoint(context.Background(), name); err != nil || raw != nil {
			t.Errorf("checkpoint %s after the purge: %q, %v", name, raw, err)
		}
	}
	step(t, b)
	for name, app := range map[string]*Runtime{"purging": a, "other": b} {
		_, err := read(app, "frm_acme", practice.Clients).List(context.Background(), practice.Tenant{Firm: "frm_acme"}, practice.Clients, practice.Query{})
		if !errors.Is(err, practice.ErrNotConnected) {
			t.Errorf("%s instance: clients after the disconnect: %v, want not connected", name, err)
		}
		if _, err := app.firms["frm_acme"].clients().CreateClient(context.Background(), practice.Tenant{Firm: "frm_acme"}, practice.ClientInput{}); !errors.Is(err, practice.ErrNotConnected) {
			t.Errorf("%s instance: a client created after the disconnect: %v, want not connected", name, err)
		}
	}
	if now := a.d.Changes.(*countingSink).count() + b.d.Changes.(*countingSink).count(); now != changed {
		t.Errorf("the purge raised %d change records", now-changed)
	}

	again := w.connectKarbon("frm_acme")
	step(t, a)
	step(t, b)
	waitFor(t, "the new connection's backfill", func() bool { return backfilled(a, again) && backfilled(b, again) })
	if n := w.stored("frm_acme", records); n != 10 {
		t.Errorf("the new connection's copy has %d records, want 10", n)
	}
	if calls := len(w.karbon.Requests()) - backfill; calls < backfill {
		t.Errorf("the new connection made %d calls, fewer than a backfill (%d): it resumed the old one's", calls, backfill)
	}
}

// The follow loop looks at every tick, and at once when a grant is
// refused here, without waiting for the next tick.
func TestFollowLoopLooksOnEachTickAndWhenWoken(t *testing.T) {
	w := newWorld(t, "frm_acme")
	a := w.instance()
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.followConnections(ctx, tick)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	openHere := func() *system {
		a.follow.mu.Lock()
		defer a.follow.mu.Unlock()
		return a.firms["frm_acme"].table.Load().conns["ledger"]
	}
	c := w.connectXero("frm_acme")
	tick <- time.Now()
	waitFor(t, "the connection opened after a tick", func() bool { return openHere() != nil })
	a.grantRefused(c)("the vendor refused the connection's grant")
	waitFor(t, "the sync paused with no tick", func() bool {
		a.follow.mu.Lock()
		defer a.follow.mu.Unlock()
		open := a.firms["frm_acme"].table.Load().conns["ledger"]
		return open != nil && !open.running()
	})
}

// A role the firm's Caddyfile block sets is served by it whatever the
// store's connections say, and a purge of such a connection leaves the
// Caddyfile system's copy alone.
func TestCaddyfileSystemTakesPrecedence(t *testing.T) {
	w := newWorld(t, "frm_acme")
	if err := w.readModel().Apply(context.Background(), "frm_acme", []readmodel.Update{{Kind: practice.Invoices,
		ID: "inv_1", Raw: json.RawMessage(`{"id":"inv_1","object":"invoice"}`)}}); err != nil {
		t.Fatal(err)
	}
	a := w.instance(func(cfg *Config, _ *Deps) {
		cfg.Firms[0].Demo = []string{"records", "documents"}
		cfg.Firms[0].Systems = []System{{Role: "ledger", Module: &fakeSystem{id: "practicegw.systems.ledger.xero",
			opened: firmsystem.Opened{Reader: noRecords{}}}}}
	})
	c := w.connectXero("frm_acme")
	step(t, a)
	if open := a.firms["frm_acme"].connections(); len(open) != 0 {
		t.Fatalf("a ledger connection opened for a firm whose Caddyfile names its ledger: %v", open[0].conn.ID)
	}
	ledger := a.firms["frm_acme"].systems[0]
	if r := read(a, "frm_acme", practice.Invoices); r != practice.Reader(ledger.model) {
		t.Errorf("invoices read from %T, not the firm's configured ledger", r)
	}
	if roles := a.Roles("frm_acme"); len(roles) != 3 || roles[1] != (adminapi.RoleView{Role: "ledger", Source: adminapi.SourceCaddyfile,
		System: "xero", Connection: c.ID, Status: "connected"}) || roles[0].Source != adminapi.SourceDemo {
		t.Errorf("sync status says %+v, want records on demo records and the ledger set in the Caddyfile", roles)
	}
	// The Caddyfile's ledger keeps its copy.
	w.conns.change(t, c.ID, func(c *connection.Connection) { c.Status = connection.Disconnected })
	gone, _ := w.conns.Connection(context.Background(), c.ID)
	if err := a.Purge(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	if n := w.stored("frm_acme", []practice.Kind{practice.Invoices}); n != 1 {
		t.Errorf("the Caddyfile ledger's copy has %d invoices after the connection's purge, want 1", n)
	}
	if _, err := read(a, "frm_acme", practice.Invoices).Get(context.Background(), practice.Tenant{Firm: "frm_acme"}, practice.Invoices, "inv_1"); err != nil {
		t.Errorf("the Caddyfile ledger's invoice after the connection's purge: %v", err)
	}
}

// A live connection this instance cannot open (its app left the connect
// block) answers reads of its role unavailable, never the demo records,
// and is reported once, not at every look.
func TestUnopenedConnectionIsUnavailable(t *testing.T) {
	w := newWorld(t, "frm_acme")
	karbonOnly := provisionedConnect(t, fmt.Sprintf(`{"karbon":{"bearer":"b","base_url":%q}}`, w.karbon.URL))
	a := w.instance(func(_ *Config, d *Deps) {
		m := d.Connected.(connect.Modules)
		m.Config = karbonOnly
		d.Connected = m
	})
	w.connectXero("frm_acme")
	if err := a.applyConnections(context.Background()); err == nil || !strings.Contains(err.Error(), "no xero app") {
		t.Fatalf("the first look: %v, want the missing app said", err)
	}
	if err := a.applyConnections(context.Background()); err != nil {
		t.Errorf("the next look says it again: %v", err)
	}
	_, err := read(a, "frm_acme", practice.Invoices).List(context.Background(), practice.Tenant{Firm: "frm_acme"}, practice.Invoices, practice.Query{})
	if !errors.Is(err, practice.ErrUnavailable) {
		t.Errorf("invoices of a connection not opened: %v, want unavailable", err)
	}
	if _, ok := read(a, "frm_acme", practice.Clients).(demoRecords); !ok {
		t.Error("a role with no connection no longer reads the demo records")
	}
}

// A correctly signed Xero delivery is answered 200 whatever the state of
// the connection whose organisation it names: the events of one that
// needs reconnecting are dropped (its sync catches up after the
// reconnect), rather than failing the app's one webhook for every firm.
func TestPausedConnectionNeverFailsXerosWebhook(t *testing.T) {
	onEachBackend(t, 1, []string{"frm_acme"}, func(t *testing.T, w *world, apps []*Runtime) {
		a := apps[0]
		c := w.connectXero("frm_acme")
		step(t, a)
		waitFor(t, "the backfill", func() bool { return backfilled(a, c) })
		// The firm removes the app at Xero: its token and grant are refused.
		w.xero.Token = "another-token"
		a.grantRefused(c)("Xero refused the connection's grant (invalid_grant)")
		step(t, a)
		id := "0f1e2d3c-0000-4000-8000-000000000003"
		w.xero.AddInvoice(vendortest.XeroInvoice{InvoiceID: id, InvoiceNumber: "INV-PAUSED", Status: "AUTHORISED",
			ContactID: "a3675fc4-f8dd-4f03-ba5b-f1870566bcd7", ContactName: "Barney Rubble", Date: time.Now(), DueDate: time.Now(),
			Total: "10.00", AmountDue: "10.00", CurrencyCode: "GBP", Updated: time.Now()})
		for range 3 {
			hook := vendortest.XeroWebhook(w.xero.TenantID, time.Now(), id)
			if got := postXero(t, a, hook, vendortest.SignXero("xero-webhook-key", hook)); got != http.StatusOK {
				t.Fatalf("a delivery naming the paused connection's organisation: %d, want 200", got)
			}
		}
		_, err := read(a, "frm_acme", practice.Invoices).Get(context.Background(), practice.Tenant{Firm: "frm_acme"}, practice.Invoices, "inv_"+id)
		if !errors.Is(err, practice.ErrNotFound) {
			t.Errorf("the paused connection took the event: %v", err)
		}
	})
}

// A reconnect that moves a connection to another organisation: while it
// waits, every instance serves the old organisation's copy, failing; the
// instance where the administrator chooses the new one purges the old
// copy and its checkpoints first; then every instance serves the new
// organisation's records alone, backfilled afresh. No read on any
// instance ever lists records of both.
func TestAnotherOrganisationReplacesTheCopy(t *testing.T) {
	onEachBackend(t, 2, []string{"frm_acme"}, func(t *testing.T, w *world, apps []*Runtime) {
		// b is a on bbolt: one gateway.
		a, b := apps[0], apps[len(apps)-1]
		c := w.connectXero("frm_acme")
		step(t, a)
		step(t, b)
		waitFor(t, "the backfill", func() bool { return backfilled(a, c) && backfilled(b, c) })
		acme := practice.Tenant{Firm: "frm_acme"}

		// Every read of either instance, all along, is of one organisation.
		done := make(chan struct{})
		var mu sync.Mutex
		var mixed []string
		var reads sync.WaitGroup
		for _, app := range []*Runtime{a, b} {
			reads.Add(1)
			go func() {
				defer reads.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					page, err := read(app, "frm_acme", practice.Invoices).List(context.Background(), acme, practice.Invoices, practice.Query{Limit: 200})
					if err != nil {
						continue
					}
					org2 := 0
					for _, raw := range page.Items {
						if strings.Contains(string(raw), "INV-ORG2") {
							org2++
						}
					}
					if org2 != 0 && org2 != len(page.Items) {
						mu.Lock()
						mixed = append(mixed, fmt.Sprintf("%d of %d invoices of the new organisation", org2, len(page.Items)))
						mu.Unlock()
					}
				}
			}()
		}

		w.conns.change(t, c.ID, func(c *connection.Connection) {
			c.Status, c.Reason, c.Attempt = connection.Pending, "reconnecting", c.Attempt+1
		})
		step(t, a)
		step(t, b)
		org2 := "0b0b0b0b-0000-4000-8000-000000000002"
		w.conns.change(t, c.ID, func(c *connection.Connection) {
			c.Status, c.Reason, c.Choices = connection.ChooseOrganisation, "choose", []connection.Organisation{{ID: org2, Name: "Second"}}
		})
		step(t, a)
		step(t, b)
		for name, app := range map[string]*Runtime{"a": a, "b": b} {
			page, err := read(app, "frm_acme", practice.Invoices).List(context.Background(), acme, practice.Invoices, practice.Query{Limit: 200})
			if err != nil || len(page.Items) != 120 {
				t.Fatalf("%s while the organisation is chosen: %d invoices, %v; want the held copy's 120", name, len(page.Items), err)
			}
		}
		// The vendor's second organisation and its invoices.
		w.xero.TenantID = org2
		for i := range 5 {
			w.xero.AddInvoice(vendortest.XeroInvoice{InvoiceID: fmt.Sprintf("0b0b0b0b-0000-4000-8000-%012d", i), InvoiceNumber: fmt.Sprintf("INV-ORG2-%d", i),
				Status: "AUTHORISED", ContactID: "a3675fc4-f8dd-4f03-ba5b-f1870566bcd7", ContactName: "Barney Rubble", Date: time.Now(),
				DueDate: time.Now(), Total: "10.00", AmountDue: "10.00", CurrencyCode: "GBP", Updated: time.Now(), Tenant: org2})
		}
		chosen, _ := w.conns.Connection(context.Background(), c.ID)
		if err := a.PurgeOrganisation(context.Background(), chosen); err != nil {
			t.Fatal(err)
		}
		if n := w.stored("frm_acme", []practice.Kind{practice.Invoices}); n != 0 {
			t.Fatalf("the old organisation's copy keeps %d invoices after the purge", n)
		}
		w.conns.change(t, c.ID, func(c *connection.Connection) {
			now := time.Now()
			c.Status, c.Reason, c.Choices, c.OrganisationID, c.OrganisationName, c.ConnectedAt = connection.Connected, "", nil, org2, "Second", &now
		})
		step(t, b)
		step(t, a)
		now, _ := w.conns.Connection(context.Background(), c.ID)
		waitFor(t, "the new organisation's backfill", func() bool { return backfilled(a, now) && backfilled(b, now) })
		close(done)
		reads.Wait()
		if len(mixed) > 0 {
			t.Fatalf("reads listed both organisations: %q", mixed[:min(3, len(mixed))])
		}
		for name, app := range map[string]*Runtime{"a": a, "b": b} {
			page, err := read(app, "frm_acme", practice.Invoices).List(context.Background(), acme, practice.Invoices, practice.Query{Limit: 200})
			if err != nil || len(page.Items) != 5 {
				t.Fatalf("%s after the new organisation's backfill: %d invoices, %v; want its 5", name, len(page.Items), err)
			}
		}
	})
}

// Karbon's billing connected as a firm's ledger is opened as the ledger
// karbon module and syncs the firm's invoices from Karbon.
func TestKarbonLedgerConnectionSyncsInvoices(t *testing.T) {
	w := newWorld(t, "frm_acme")
	for i := range 5 {
		w.karbon.AddInvoice(vendortest.KarbonInvoice{InvoiceKey: fmt.Sprintf("I%03d", i), InvoiceNumber: fmt.Sprintf("KIN-%d", i),
			ClientKey: "C001", ClientType: "Contact", Total: "100.00", Status: "AwaitingPayment",
			InvoiceDate: time.Now(), DueDate: time.Now().AddDate(0, 0, 14)})
	}
	a := w.instance()
	c := w.connectKarbon("frm_acme")
	c.ID, c.Role = c.ID+"l", "ledger"
	if err := w.store.Save(context.Background(), connect.SecretKey(c.ID, "access_key"), []byte(w.karbon.AccessKey)); err != nil {
		t.Fatal(err)
	}
	c = w.conns.create(c)
	step(t, a)
	waitFor(t, "the ledger's backfill", func() bool { return backfilled(a, c) })
	if n := w.stored("frm_acme", firmsystem.Kinds("ledger")); n != 5 {
		t.Fatalf("the store keeps %d invoices, want Karbon's 5", n)
	}
	if _, syncs := a.Use(c); len(syncs) != 1 || syncs[0].Role != "ledger" {
		t.Fatalf("the ledger connection's syncs: %+v", syncs)
	}
	if h, ok := a.ConnectionWebhook("karbon", c.ID); !ok || h == nil {
		t.Fatal("the ledger connection's webhook route is not served")
	}
}

// Leaving an organisation forgets what the system remembers of it beyond
// the copy (XPM's first-seen stamps and its engagements' signings), on
// another organisation chosen as on a disconnect; what other firms and
// systems keep stays.
func TestLeavingAnOrganisationForgetsWhatItsSystemRemembers(t *testing.T) {
	onEachBackend(t, 1, []string{"frm_acme", "frm_other"}, func(t *testing.T, w *world, apps []*Runtime) {
		a := apps[0]
		ctx := context.Background()
		forgotten := []string{"xpm/seen/frm_acme/live/clients/cli_1", "xpm/seen/frm_acme/live/jobs/job_J000001",
			"signed/frm_acme/live/engagements/eng_1"}
		kept := []string{"xpm/seen/frm_other/live/clients/cli_1", "xpm/seen/frm_acme/live/invoices/inv_1",
			"signed/frm_other/live/engagements/eng_1"}
		for _, leave := range []struct {
			name  string
			purge func(context.Context, connection.Connection) error
		}{{"another organisation chosen", a.PurgeOrganisation}, {"a disconnect", a.Purge}} {
			for _, k := range append(forgotten, kept...) {
				if err := w.store.Save(ctx, k, []byte(`{"d":"x"}`)); err != nil {
					t.Fatal(err)
				}
			}
			connectionSeq++
			c := w.conns.create(connection.Connection{ID: fmt.Sprintf("con_p%d", connectionSeq), Firm: "frm_acme", Role: "records",
				System: "xpm", Status: connection.ChooseOrganisation, OrganisationID: "practice-1", Attempt: 2})
			if err := leave.purge(ctx, c); err != nil {
				t.Fatalf("%s: %v", leave.name, err)
			}
			for _, k := range forgotten {
				if got, err := w.store.Last(ctx, k); err != nil || got != nil {
					t.Errorf("%s: %s still kept (%q, %v)", leave.name, k, got, err)
				}
			}
			for _, k := range kept {
				if got, err := w.store.Last(ctx, k); err != nil || got == nil {
					t.Errorf("%s: %s forgotten (%v)", leave.name, k, err)
				}
			}
		}
	})
}

// An instance that misses a whole reconnect to another organisation (it
// does not look at the store from before the reconnect until after the
// new organisation is chosen) still syncs the old one: whatever it writes
// after the purge is refused by the fence the purge raised, so the copy
// never holds records of both organisations, and when it looks it serves
// the new one's alone.
func TestAStaleInstanceCannotWriteTheOldOrganisationAfterThePurge(t *testing.T) {
	w := newWorld(t, "frm_acme")
	stale, b := w.instance(), w.instance()
	c := w.connectXero("frm_acme")
	step(t, stale)
	step(t, b)
	waitFor(t, "the backfill", func() bool { return backfilled(stale, c) && backfilled(b, c) })
	ctx := context.Background()
	acme := practice.Tenant{Firm: "frm_acme"}
	old := stale.firms["frm_acme"].table.Load().conns["ledger"]
	page, err := old.model.List(ctx, acme, practice.Invoices, practice.Query{Limit: 1})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("the old organisation's copy: %v", err)
	}

	// The reconnect, the choice and the purge, seen by b alone.
	w.conns.change(t, c.ID, func(c *connection.Connection) {
		c.Status, c.Reason, c.Attempt = connection.Pending, "reconnecting", c.Attempt+1
	})
	step(t, b)
	org2 := "0b0b0b0b-0000-4000-8000-000000000002"
	w.conns.change(t, c.ID, func(c *connection.Connection) {
		c.Status, c.Reason, c.Choices = connection.ChooseOrganisation, "choose", []connection.Organisation{{ID: org2, Name: "Second"}}
	})
	step(t, b)
	w.xero.TenantID = org2
	for i := range 5 {
		w.xero.AddInvoice(vendortest.XeroInvoice{InvoiceID: fmt.Sprintf("0b0b0b0b-0000-4000-8000-%012d", i), InvoiceNumber: fmt.Sprintf("INV-ORG2-%d", i),
			Status: "AUTHORISED", ContactID: "a3675fc4-f8dd-4f03-ba5b-f1870566bcd7", ContactName: "Barney Rubble", Date: time.Now(),
			DueDate: time.Now(), Total: "10.00", AmountDue: "10.00", CurrencyCode: "GBP", Updated: time.Now(), Tenant: org2})
	}
	chosen, _ := w.conns.Connection(ctx, c.ID)
	if err := b.PurgeOrganisation(ctx, chosen); err != nil {
		t.Fatal(err)
	}
	w.conns.change(t, c.ID, func(c *connection.Connection) {
		now := time.Now()
		c.Status, c.Reason, c.Choices, c.OrganisationID, c.OrganisationName, c.ConnectedAt = connection.Connected, "", nil, org2, "Second", &now
	})
	step(t, b)
	now, _ := w.conns.Connection(ctx, c.ID)

	// The stale instance's sync writes what it read of the old
	// organisation, as a page read before the purge lands after it.
	var inv map[string]any
	if err := json.Unmarshal(page.Items[0], &inv); err != nil {
		t.Fatal(err)
	}
	inv["id"], inv["number"] = "inv_stale-old-organisation", "INV-STALE"
	raw, _ := json.Marshal(inv)
	err = old.model.Apply(ctx, []readmodel.Update{{Kind: practice.Invoices, ID: "inv_stale-old-organisation", Raw: raw}})
	if !errors.Is(err, readmodel.ErrFenced) {
		t.Errorf("the stale instance's write of the old organisation after the purge: %v, want refused by the fence", err)
	}
	// Nor what its adapter remembers of the old organisation's records
	// beyond the copy (a first-seen stamp): it would lend the new
	// organisation's record of the same id its time.
	const stamp = "xpm/seen/frm_acme/live/invoices/inv_stale-old-organisation"
	if err := old.model.Save(ctx, stamp, []byte(`{"f":"2026-01-01T00:00:00Z"}`)); !errors.Is(err, readmodel.ErrFenced) {
		t.Errorf("the stale instance's stamp after the purge: %v, want refused by the fence", err)
	}
	if got, _ := w.store.Last(ctx, stamp); got != nil {
		t.Errorf("the stale instance's stamp was saved: %s", got)
	}
	organisations := func() (oldOnes, newOnes int) {
		err := w.readModel().Load(ctx, "frm_acme", func(u readmodel.Update) error {
			if u.Kind == practice.Invoices && strings.Contains(string(u.Raw), "INV-ORG2") {
				newOnes++
			} else if u.Kind == practice.Invoices {
				oldOnes++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return oldOnes, newOnes
	}
	if o, _ := organisations(); o != 0 {
		t.Fatalf("the shared copy holds %d invoices of the old organisation after the purge", o)
	}
	// It looks at last, lets its lease go, and the new organisation is
	// backfilled.
	step(t, stale)
	waitFor(t, "the new organisation's backfill", func() bool { return backfilled(b, now) && backfilled(stale, now) })
	if o, n := organisations(); o != 0 || n != 5 {
		t.Fatalf("the shared copy holds %d invoices of the old organisation and %d of the new", o, n)
	}
	got, err := read(stale, "frm_acme", practice.Invoices).List(ctx, acme, practice.Invoices, practice.Query{Limit: 200})
	if err != nil || len(got.Items) != 5 {
		t.Fatalf("the stale instance after it looked: %d invoices, %v; want the new organisation's 5", len(got.Items), err)
	}
}

// An instance that misses a disconnect (it does not look at the store
// between the disconnect and this check) still syncs the connection:
// whatever it writes after the disconnecting instance's purge is refused
// by the fence the purge raised, so from the purge on the store holds
// nothing of the connection, not only once the stale instance looks and
// purges again.
func TestAStaleInstanceCannotWriteAfterADisconnectsPurge(t *testing.T) {
	w := newWorld(t, "frm_acme")
	stale, b := w.instance(), w.instance()
	c := w.connectXero("frm_acme")
	step(t, stale)
	step(t, b)
	waitFor(t, "the backfill", func() bool { return backfilled(stale, c) && backfilled(b, c) })
	ctx := context.Background()
	acme := practice.Tenant{Firm: "frm_acme"}
	old := stale.firms["frm_acme"].table.Load().conns["ledger"]
	page, err := old.model.List(ctx, acme, practice.Invoices, practice.Query{Limit: 1})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("the connection's copy: %v", err)
	}

	// The disconnect, seen by b alone, as the connections manager does
	// it: the purge, then the status.
	if err := b.Purge(ctx, c); err != nil {
		t.Fatal(err)
	}
	w.conns.change(t, c.ID, func(c *connection.Connection) {
		c.Status, c.Reason = connection.Disconnected, "disconnected by the gateway's operator with practicegw connect disconnect"
	})
	step(t, b)

	// The stale instance's sync writes what it read before the purge.
	var inv map[string]any
	if err := json.Unmarshal(page.Items[0], &inv); err != nil {
		t.Fatal(err)
	}
	inv["id"], inv["number"] = "inv_stale-after-disconnect", "INV-STALE"
	raw, _ := json.Marshal(inv)
	err = old.model.Apply(ctx, []readmodel.Update{{Kind: practice.Invoices, ID: "inv_stale-after-disconnect", Raw: raw}})
	if !errors.Is(err, readmodel.ErrFenced) {
		t.Errorf("the stale instance's write after the disconnect's purge: %v, want refused by the fence", err)
	}
	const stamp = "xero/seen/frm_acme/live/invoices/inv_stale-after-disconnect"
	if err := old.model.Save(ctx, stamp, []byte(`{"f":"2026-01-01T00:00:00Z"}`)); !errors.Is(err, readmodel.ErrFenced) {
		t.Errorf("the stale instance's upstream state after the disconnect's purge: %v, want refused by the fence", err)
	}
	if got, _ := w.store.Last(ctx, stamp); got != nil {
		t.Errorf("the stale instance's upstream state was saved: %s", got)
	}
	nothingKept := func(when string) {
		t.Helper()
		if n := w.stored("frm_acme", firmsystem.Kinds("ledger")); n != 0 {
			t.Fatalf("%s: the store holds %d records of the disconnected connection", when, n)
		}
		for _, name := range readmodel.SyncCheckpoints("frm_acme", "ledger") {
			if raw, err := w.readModel().Checkpoint(ctx, name); err != nil || raw != nil {
				t.Fatalf("%s: the store holds the disconnected connection's checkpoint %s: %s, %v", when, name, raw, err)
			}
		}
	}
	nothingKept("before the stale instance looks")
	// It looks at last: the role is not connected there either, and the
	// store still holds nothing.
	step(t, stale)
	nothingKept("after the stale instance looked")
	if _, err := read(stale, "frm_acme", practice.Invoices).List(ctx, acme, practice.Invoices, practice.Query{Limit: 1}); err == nil {
		t.Errorf("the stale instance still serves the disconnected connection's copy")
	}
}

// connectConfig is a connect block from its JSON.
func connectConfig(t *testing.T, raw string) *connect.Config {
	t.Helper()
	var c connect.Config
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	return &c
}
