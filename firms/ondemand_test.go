package firms

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// gettingVendor is a vendor whose backfill has not begun: it counts the
// single-record reads it answers. It has no job whose id starts with
// job_missing, and answers job_wrong with another job.
type gettingVendor struct {
	practice.Reader
	mu   sync.Mutex
	gets int
}

func (v *gettingVendor) Get(_ context.Context, _ practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	v.mu.Lock()
	v.gets++
	v.mu.Unlock()
	switch {
	case strings.HasPrefix(id, "job_missing"):
		return nil, fmt.Errorf("job %s: %w", id, practice.ErrNotFound)
	case id == "job_wrong":
		id = "job_other"
	}
	return json.RawMessage(`{"id":"` + id + `","object":"job","title":"Accounts"}`), nil
}

func (v *gettingVendor) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.gets
}

// backfillingFirm is frm_acme on a Karbon-limited vendor, opened as the
// runtime opens a firm's systems, with no backfill yet: every read of a
// job goes to the vendor.
func backfillingFirm(t *testing.T) (*readmodel.Model, *gettingVendor, *vendortest.Clock) {
	t.Helper()
	clock := vendortest.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	client, err := upstream.NewClient(upstream.Options{System: "karbon", BaseURL: "https://api.karbonhq.example",
		Defaults: upstream.Policy{RateLimit: 120, RatePeriod: upstream.Duration(time.Minute)}}, upstream.Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	v := &gettingVendor{}
	r := openedFirm(t, &fakeSystem{id: "practicegw.systems.records.karbon", opened: firmsystem.Opened{Label: "Karbon", Reader: v, Client: client}})
	return r.firms["frm_acme"].systems[0].model, v, clock
}

// openedFirm is a runtime of frm_acme, whose Caddyfile names mod as its
// records system, on an embedded store: opened as the gateway opens it,
// its syncs made and not run.
func openedFirm(t *testing.T, mod *fakeSystem) *Runtime {
	t.Helper()
	st := boltStore(t)
	r, err := New(context.Background(), Config{Holder: "test/1", Firms: []Firm{{ID: "frm_acme", Systems: []System{{Role: "records", Module: mod}}}}},
		// No budget of the gateway's: the vendor's own, on the test's clock.
		Deps{Logger: zap.NewNop(), Store: st.ReadModel(), State: st, Notices: st, Changes: &countingSink{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// While a backfill runs (or fails), 300 reads of records not yet copied
// sent 300 calls to the vendor, misses included. Misses are remembered,
// and the reads have their own small share: past it they answer 503 with
// Retry-After.
func TestOnDemandReadsSpendTheirShareOnly(t *testing.T) {
	model, v, clock := backfillingFirm(t)
	acme := practice.Tenant{Firm: "frm_acme"}
	ctx := context.Background()

	for i := range 300 {
		if i < 5 {
			// A new miss each a share's interval apart (12 a minute).
			clock.Advance(5 * time.Second)
		}
		_, err := model.Get(ctx, acme, practice.Jobs, fmt.Sprintf("job_missing%d", i%5))
		if e, _ := apierror.From(err); e == nil || e.Status != http.StatusNotFound {
			t.Fatalf("read %d of a job the vendor does not have: %v", i, err)
		}
	}
	if n := v.count(); n != 5 {
		t.Errorf("300 reads of 5 missing jobs made %d vendor calls, want 5", n)
	}

	clock.Advance(time.Minute)
	before := v.count()
	refused := 0
	for i := range 300 {
		_, err := model.Get(ctx, acme, practice.Jobs, fmt.Sprintf("job_missing_new%d", i))
		e, _ := apierror.From(err)
		switch {
		case e != nil && e.Status == http.StatusServiceUnavailable && e.Code == "upstream_unavailable" && e.Header.Get("Retry-After") != "":
			refused++
		case e == nil || e.Status != http.StatusNotFound:
			t.Fatalf("read %d: %v", i, err)
		}
	}
	// Karbon publishes 120 calls a minute; reads may take a tenth.
	if n := v.count() - before; n > 12 || n == 0 {
		t.Errorf("300 reads of distinct missing jobs in one minute made %d vendor calls, want at most 12", n)
	}
	if refused < 288 {
		t.Errorf("%d reads refused past the share, want at least 288", refused)
	}

	// The share refills with time.
	clock.Advance(time.Minute)
	if _, err := model.Get(ctx, acme, practice.Jobs, "job_W0001"); err != nil {
		t.Errorf("a read a minute later: %v", err)
	}
	// A miss is asked again once it is old.
	clock.Advance(upstream.MissTTL)
	before = v.count()
	_, _ = model.Get(ctx, acme, practice.Jobs, "job_missing0")
	if v.count() != before+1 {
		t.Error("a miss older than MissTTL was not asked again")
	}
}

// A vendor answer to an on-demand read that is not the record asked for
// was a 500; it is a 502 with the contract's body, as everywhere else.
func TestOnDemandReadOfAnotherRecordIsBadGateway(t *testing.T) {
	model, _, _ := backfillingFirm(t)
	raw, err := model.Get(context.Background(), practice.Tenant{Firm: "frm_acme"}, practice.Jobs, "job_wrong")
	e, ok := apierror.From(err)
	if !ok || e.Status != http.StatusBadGateway || e.Code != "upstream_unavailable" {
		t.Fatalf("a vendor answering another job: %s, %v (%+v)", raw, err, e)
	}
	if model.Count(practice.Jobs) != 0 {
		t.Error("the unusable answer was kept in the read model")
	}
}

// A firm on Xero Practice Manager whose ledger is XPM too has two syncs
// on one organisation, each with a quarter of its 5,000 calls a day: its
// status says the plan, and readiness says it as a short phrase of its
// own.
func TestSyncStatusSaysThePlan(t *testing.T) {
	clock := vendortest.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	client, err := upstream.NewClient(upstream.Options{System: "xpm", BaseURL: "https://api.xero.example",
		Defaults: upstream.Policy{RateLimit: 60, RatePeriod: upstream.Duration(time.Minute)}, BudgetSystem: "xero",
		Allowances: []upstream.Allowance{{Limit: 5000, Per: 24 * time.Hour}}}, upstream.Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	v := &gettingVendor{}
	r := openedFirm(t, &fakeSystem{id: "practicegw.systems.records.xpm",
		opened: firmsystem.Opened{Label: "Xero Practice Manager", Reader: v, Ledger: v, Client: client}})
	statuses := r.SyncStatus("frm_acme")
	if len(statuses) != 2 || statuses[0].Role != "ledger" || statuses[1].Role != "records" {
		t.Fatalf("syncs: %+v", statuses)
	}
	for _, st := range statuses {
		p := st.Plan
		if p.Limit != 5000 || int(p.Share*float64(p.Limit)) != 1250 || p.Period != 24*time.Hour || p.CallsPerPeriod == 0 || p.CallsPerPeriod > 1250 {
			t.Errorf("%s's plan: %+v", st.Role, p)
		}
		if !strings.Contains(p.String(), "of 5,000 calls a day, at most 1,250 for this sync") {
			t.Errorf("%s's plan for people: %q", st.Role, p.String())
		}
		for kind, every := range p.PollEvery {
			if every < time.Minute {
				t.Errorf("%s %s polled every %s", st.Role, kind, every)
			}
		}
	}
	var checks []Check
	for _, c := range r.Checks(clock.Now()) {
		if strings.HasPrefix(c.Name, "sync ") {
			checks = append(checks, c)
		}
	}
	if len(checks) != 2 {
		t.Fatalf("readiness: %+v", checks)
	}
	for _, c := range checks {
		if !strings.Contains(c.Detail, "; polls ") || !strings.Contains(c.Detail, "at most 1,250 for this sync") {
			t.Errorf("readiness of %s: %q", c.Name, c.Detail)
		}
	}
}
