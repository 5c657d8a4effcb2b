package readmodel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

// What Data-State and Data-Confirmed-At promise, for every kind of a firm
// on Karbon (its records, and its billing as the ledger, over one access
// key), with the default configuration, on the bubble's clock
// (testing/synctest): every kind is confirmed against Karbon at least as
// often as the plan says, with no webhook at all (Karbon's work items and
// users carry no modification time, and were once left to webhooks
// alone); a change made in Karbon is in the copy within its kind's poll;
// while Karbon fails every kind it serves turns away from live within one
// poll and Data-Confirmed-At stays where it was.

// stoppable serves the doubles until stopped; stopped, their address
// refuses connections, as a Karbon that is not running does.
type stoppable struct {
	serve   vendortest.Serve
	stopped *atomic.Bool
}

func (s stoppable) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.stopped.Load() {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return s.serve.RoundTrip(r)
}

// karbonFirm is a firm's Karbon double, filled at a seeded size, with
// the records it holds by kind.
type karbonFirm struct {
	k        *vendortest.Karbon
	stopped  atomic.Bool
	contacts map[string]vendortest.KarbonContact
	users    map[string]vendortest.KarbonUser
	work     []string
}

// truthEpoch is when the double's records last changed: before the
// bubble's clock starts (2000-01-01).
var truthEpoch = time.Date(1999, 12, 1, 9, 0, 0, 0, time.UTC)

func newKarbonFirm(t *testing.T, r *rand.Rand) *karbonFirm {
	k := vendortest.NewKarbon()
	t.Cleanup(k.Close)
	k.Conforms(t)
	f := &karbonFirm{k: k, contacts: map[string]vendortest.KarbonContact{}, users: map[string]vendortest.KarbonUser{}}
	staff, clients, jobs, invoices := 2+r.IntN(8), 20+r.IntN(80), 100+r.IntN(250), 20+r.IntN(80)
	for i := range staff {
		u := vendortest.KarbonUser{Id: fmt.Sprintf("U%03d", i), Name: fmt.Sprintf("Staff %d", i),
			EmailAddress: fmt.Sprintf("staff%d@firm.example", i), Roles: []string{"Manager"}}
		k.AddUser(u)
		f.users[u.Id] = u
	}
	for i := range clients {
		c := vendortest.KarbonContact{ContactKey: fmt.Sprintf("C%05d", i), FirstName: "Client", LastName: fmt.Sprintf("%05d", i),
			ContactType: "Client", Email: fmt.Sprintf("c%d@example.com", i), Country: "GB", OwnerKey: fmt.Sprintf("U%03d", i%staff),
			LastModified: truthEpoch}
		k.AddContact(c)
		f.contacts[c.ContactKey] = c
	}
	for i := range jobs {
		deadline := truthEpoch.AddDate(0, 0, i%365).Format(time.RFC3339)
		key := fmt.Sprintf("W%06d", i)
		k.AddWorkItem(vendortest.KarbonWorkItem{WorkItemKey: key, Title: fmt.Sprintf("Accounts %d", i),
			AssigneeKey: fmt.Sprintf("U%03d", i%staff), ClientKey: fmt.Sprintf("C%05d", i%clients), ClientType: "Contact",
			StartDate: truthEpoch.Format(time.RFC3339), DeadlineDate: &deadline, WorkType: "Accounts", PrimaryStatus: "Planned"})
		f.work = append(f.work, key)
	}
	k.SetNow(func() time.Time { return truthEpoch })
	for i := range invoices {
		k.AddInvoice(vendortest.KarbonInvoice{InvoiceKey: fmt.Sprintf("I%06d", i), InvoiceNumber: fmt.Sprintf("KIN-%06d", i),
			ClientKey: fmt.Sprintf("C%05d", i%clients), ClientType: "Contact", ClientName: fmt.Sprintf("Client %05d", i%clients),
			Total: "1200.00", Tax: "200.00", CurrencyCode: "GBP", Status: "AwaitingPayment",
			InvoiceDate: truthEpoch.AddDate(0, 0, -20), DueDate: truthEpoch.AddDate(0, 0, 10), CreatedAt: truthEpoch, UpdatedAt: truthEpoch})
	}
	k.SetNow(func() time.Time { return time.Now().UTC().Truncate(time.Second) })
	return f
}

// syncs opens the firm's Karbon as the gateway does for records karbon
// with no other ledger (one adapter, synced as the records and as the
// ledger, on Karbon's published 120 calls a minute), inside the bubble.
func (f *karbonFirm) syncs(t *testing.T) (*readmodel.Model, []*readmodel.Syncer) {
	t.Helper()
	host := strings.TrimPrefix(f.k.URL, "http://")
	deps := upstream.Deps{Budget: upstream.NewLocalBudget(nil), Clock: upstream.SystemClock{},
		Transport: stoppable{serve: vendortest.Serve{Hosts: map[string]http.Handler{host: f.k.Handler()}}, stopped: &f.stopped}}
	a, err := karbon.New(karbon.Config{Firm: firm, AccessKey: f.k.AccessKey, Bearer: f.k.Bearer, BaseURL: f.k.URL,
		WebhookSigningKey: "karbon-signing-key-0001"}, deps, karbon.AsLedger())
	if err != nil {
		t.Fatal(err)
	}
	st := readmodelsim.NewStore(nil)
	model := readmodel.New(readmodel.Config{Firm: firm, Store: st})
	rec := &changes.Recorder{State: model}
	budget := readmodel.SyncBudget{Account: a.Upstream().BudgetAccount()}
	for _, al := range a.Upstream().Allowances() {
		budget.Allowances = append(budget.Allowances, readmodel.Allowance{Limit: al.Limit, Per: al.Per})
	}
	var syncs []*readmodel.Syncer
	for _, role := range []struct {
		name  string
		kinds []practice.Kind
	}{{"records", []practice.Kind{practice.Clients, practice.Jobs, practice.People}}, {"ledger", []practice.Kind{practice.Invoices}}} {
		for _, k := range role.kinds {
			model.Serve(k, a)
		}
		syncs = append(syncs, readmodel.NewSyncer(readmodel.SyncedSystem{Role: role.name, System: "karbon", Label: "Karbon", Kinds: role.kinds, Reader: a},
			readmodel.SyncDeps{Model: model, Recorder: rec, Sink: &sink{}, Checkpoints: st, Leases: st, Holder: "one"},
			readmodel.SyncConfig{}, readmodel.WithVendorCalls(a.Upstream().Sent, 0), readmodel.WithBudget(budget)))
	}
	readmodel.ShareBudgets(syncs)
	return model, syncs
}

// running runs syncs until the test's function returns.
func running(t *testing.T, syncs []*readmodel.Syncer) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range syncs {
		wg.Go(func() { s.Run(ctx) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// untilLive waits, on the bubble's clock, for every sync to be live.
func untilLive(t *testing.T, syncs []*readmodel.Syncer) {
	t.Helper()
	for range 60 * 6 {
		live := true
		for _, s := range syncs {
			live = live && s.Status().State == readmodel.StateLive
		}
		if live {
			return
		}
		time.Sleep(10 * time.Second)
	}
	for _, s := range syncs {
		st := s.Status()
		t.Fatalf("%s after an hour: %s %s (%s)", s.Role(), st.State, st.Why, st.Progress())
	}
}

// every is how often the plan of s polls kind k.
func every(t *testing.T, s *readmodel.Syncer, k practice.Kind) time.Duration {
	t.Helper()
	d, ok := s.Status().Plan.PollEvery[string(k)]
	if !ok || d <= 0 {
		t.Fatalf("%s's plan %v does not poll %s", s.Role(), s.Status().Plan.PollEvery, k)
	}
	return d
}

// confirmSlack is how late past its interval a kind's confirmation may
// be: the poll's own pages, and the other kinds' passes due at the same
// moment, under Karbon's rate.
const confirmSlack = time.Minute

// change is one change made in Karbon, and what the copy must then show.
type change struct {
	kind         practice.Kind
	id           string
	field, value string
	due          time.Time
}

// makeChange changes a record of a kind picked by r that no change
// touched yet, as a user would in Karbon, and never tells the gateway.
func (f *karbonFirm) makeChange(r *rand.Rand, n int, touched map[string]bool) (practice.Kind, string, string, string) {
	value := fmt.Sprintf("Changed %d", n)
	pick := func(keys []string) (string, bool) {
		for range 20 {
			if key := keys[r.IntN(len(keys))]; !touched[key] {
				touched[key] = true
				return key, true
			}
		}
		return "", false
	}
	switch r.IntN(3) {
	case 0:
		if key, ok := pick(slices.Sorted(maps.Keys(f.users))); ok {
			u := f.users[key]
			u.Name = value
			f.k.AddUser(u)
			f.users[key] = u
			return practice.People, "usr_" + key, "name", value
		}
	case 1:
		if key, ok := pick(slices.Sorted(maps.Keys(f.contacts))); ok {
			c := f.contacts[key]
			c.LastName, c.LastModified = value, time.Now().UTC().Truncate(time.Second)
			f.k.AddContact(c)
			f.contacts[key] = c
			return practice.Clients, "cli_c-" + key, "name", "Client " + value
		}
	}
	key, ok := pick(f.work)
	if !ok {
		panic("no work item left to change")
	}
	w, _ := f.k.WorkItem(key)
	w.Title = value
	f.k.AddWorkItem(w)
	return practice.Jobs, "job_" + key, "title", value
}

func field(t *testing.T, m *readmodel.Model, k practice.Kind, id, name string) string {
	t.Helper()
	raw, err := m.Get(context.Background(), live, k, id)
	if err != nil {
		t.Fatalf("%s %s from the copy: %v", k, id, err)
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	s, _ := v[name].(string)
	return s
}

// Every kind is confirmed within its plan's interval, and every change
// made in Karbon, told by no webhook, is in the copy within its kind's
// poll: changes at seeded moments, in firms of seeded sizes, so that they
// land before, during and after the polls that find them.
func TestEveryKindIsPolledWithinItsPlan(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 39))
			f := newKarbonFirm(t, r)
			synctest.Test(t, func(t *testing.T) {
				model, syncs := f.syncs(t)
				running(t, syncs)
				untilLive(t, syncs)
				of := map[practice.Kind]*readmodel.Syncer{}
				for _, s := range syncs {
					for _, ks := range s.Status().Kinds {
						of[ks.Kind] = s
					}
				}
				var pending []change
				touched := map[string]bool{}
				next := time.Now().Add(time.Duration(r.IntN(300)) * time.Second)
				end := time.Now().Add(time.Hour)
				for n := 0; time.Now().Before(end); {
					if !time.Now().Before(next) {
						k, id, name, value := f.makeChange(r, n, touched)
						n++
						pending = append(pending, change{k, id, name, value, time.Now().Add(every(t, of[k], k) + confirmSlack)})
						next = time.Now().Add(time.Duration(1+r.IntN(400)) * time.Second)
					}
					time.Sleep(time.Duration(1+r.IntN(20)) * time.Second)
					now := time.Now()
					for _, s := range syncs {
						st := s.Status()
						for _, ks := range st.Kinds {
							if ks.State != readmodel.StateLive {
								t.Fatalf("%s %s: %s %s", s.Role(), ks.Kind, ks.State, ks.Why)
							}
							if age, limit := now.Sub(ks.ConfirmedAt), every(t, s, ks.Kind)+confirmSlack; age > limit {
								t.Fatalf("%s: confirmed %s ago, its plan polls it every %s (%s)", ks.Kind, age, every(t, s, ks.Kind), st.Plan)
							}
						}
					}
					kept := pending[:0]
					for _, c := range pending {
						if got := field(t, model, c.kind, c.id, c.field); got == c.value {
							continue
						} else if now.After(c.due) {
							t.Fatalf("%s %s: %s %q, want %q, its poll due by %s", c.kind, c.id, c.field, got, c.value, c.due.Format(time.TimeOnly))
						}
						kept = append(kept, c)
					}
					pending = kept
				}
				if n := f.k.Faults.Hits(); n == 0 {
					t.Fatal("Karbon was never asked")
				}
				t.Logf("plans: %s; %s", syncs[0].Status().Plan, syncs[1].Status().Plan)
			})
		})
	}
}

// While Karbon is stopped or answers 503, every kind it serves, of both
// of its syncs, answers lagging or failing within one poll (the
// shortest interval of each sync's plan, and the retries of the call
// that finds it), and Data-Confirmed-At does not move; once Karbon is
// back, every kind is confirmed again and live. The outage starts at a
// seeded moment of the polls' cycle and lasts a seeded while.
func TestVendorDownTurnsEveryKindAwayFromLive(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 4))
			f := newKarbonFirm(t, r)
			synctest.Test(t, func(t *testing.T) {
				model, syncs := f.syncs(t)
				running(t, syncs)
				untilLive(t, syncs)
				time.Sleep(time.Duration(r.IntN(180)) * time.Second)
				var within time.Duration
				for _, s := range syncs {
					shortest := time.Duration(0)
					for _, d := range s.Status().Plan.PollEvery {
						if shortest == 0 || d < shortest {
							shortest = d
						}
					}
					within = max(within, shortest)
				}
				within += 30 * time.Second
				kinds := []practice.Kind{practice.Clients, practice.Jobs, practice.People, practice.Invoices}
				before := map[practice.Kind]time.Time{}
				for _, k := range kinds {
					fr, _ := model.Freshness(k)
					before[k] = fr.ConfirmedAt
				}
				refused := r.IntN(2) == 0
				if refused {
					f.stopped.Store(true)
				} else {
					f.k.Faults.Down(vendortest.Fault{Status: http.StatusServiceUnavailable, RetryAfter: "1",
						Body: `{"error":{"code":"5003","message":"Service unavailable"}}`})
				}
				down := time.Now()
				outage := within + time.Duration(r.IntN(300))*time.Second
				for time.Since(down) < outage {
					time.Sleep(time.Duration(1+r.IntN(10)) * time.Second)
					for _, k := range kinds {
						fr, _ := model.Freshness(k)
						if fr.ConfirmedAt.After(down) || fr.ConfirmedAt.Before(before[k]) {
							t.Fatalf("%s confirmed at %s during an outage from %s (before it %s)", k, fr.ConfirmedAt, down, before[k])
						}
						if time.Since(down) > within && fr.State != readmodel.StateFailing && fr.State != readmodel.StateLagging {
							t.Fatalf("%s is %s %s after Karbon stopped (refused %v); every kind must be away from live within %s",
								k, fr.State, time.Since(down), refused, within)
						}
					}
				}
				f.stopped.Store(false)
				f.k.Faults.Up()
				up := time.Now()
				for {
					back := true
					for _, k := range kinds {
						fr, _ := model.Freshness(k)
						back = back && fr.State == readmodel.StateLive && fr.ConfirmedAt.After(down)
					}
					if back {
						break
					}
					if time.Since(up) > 3*within {
						for _, s := range syncs {
							st := s.Status()
							t.Errorf("%s %s after Karbon came back: %s %s", time.Since(up), s.Role(), st.State, st.Why)
						}
						t.FailNow()
					}
					time.Sleep(5 * time.Second)
				}
			})
		})
	}
}
