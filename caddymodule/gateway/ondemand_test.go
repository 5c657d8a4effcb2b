package gateway

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
	"github.com/practicegw/practicegw/internal/adminapi"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
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

// backfillingFirm is frm_acme on a Karbon-limited vendor, with the read
// model built as the app builds it and no backfill yet: every read of a
// job goes to the vendor.
func backfillingFirm(t *testing.T) (*readmodel.Model, *gettingVendor, *vendortest.Clock) {
	t.Helper()
	clock := vendortest.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	client, err := upstream.NewClient(upstream.Options{System: "karbon", BaseURL: "https://api.karbonhq.example",
		Defaults: upstream.Policy{RateLimit: 120, RatePeriod: upstream.Duration(time.Minute)}}, upstream.Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	_, cp := syncAdminServer(t)
	app := &App{logger: zap.NewNop(), holder: "test/1", readStore: cp, firms: map[string]*firmBackends{}}
	model := app.newModel("frm_acme")
	v := &gettingVendor{}
	app.syncFor(&Firm{ID: "frm_acme"}, "records", firmsystem.Kinds("records"), "karbon", "Karbon", model, v, client, &changes.Recorder{State: model}, readmodel.SyncConfig{})
	if err := model.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return model, v, clock
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

// The admin route (and so `practicegw sync status`) says the plan of a
// firm on Xero Practice Manager whose ledger is XPM too: two syncs on one
// organisation, each with a quarter of its 5,000 calls a day.
func TestAdminSyncStatusSaysThePlan(t *testing.T) {
	clock := vendortest.NewClock(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	client, err := upstream.NewClient(upstream.Options{System: "xpm", BaseURL: "https://api.xero.example",
		Defaults: upstream.Policy{RateLimit: 60, RatePeriod: upstream.Duration(time.Minute)}, BudgetSystem: "xero",
		Allowances: []upstream.Allowance{{Limit: 5000, Per: 24 * time.Hour}}}, upstream.Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	_, cp := syncAdminServer(t)
	app := &App{logger: zap.NewNop(), holder: "test/1", readStore: cp, firms: map[string]*firmBackends{}}
	acme := &Firm{ID: "frm_acme"}
	model := app.newModel(acme.ID)
	v := &gettingVendor{}
	syncs := []*readmodel.Syncer{
		app.syncFor(acme, "records", firmsystem.Kinds("records"), "xpm", "Xero Practice Manager", model, v, client, nil, readmodel.SyncConfig{}),
		app.syncFor(acme, "ledger", firmsystem.Kinds("ledger"), "xpm", "Xero Practice Manager", model, v, client, nil, readmodel.SyncConfig{}),
	}
	readmodel.ShareBudgets(syncs)
	views := []adminapi.SyncView{}
	for _, s := range syncs {
		views = append(views, syncViewOf(s.Status(), clock.Now()))
	}
	for _, v := range views {
		if v.PlanLimit != 5000 || v.PlanShare != 1250 || v.PlanPeriod != "24h0m0s" || v.PlanCalls == 0 || v.PlanCalls > 1250 {
			t.Errorf("%s's plan: %+v", v.Role, v)
		}
		if !strings.Contains(v.Plan, "of 5,000 calls a day, at most 1,250 for this sync") {
			t.Errorf("%s's plan for people: %q", v.Role, v.Plan)
		}
		for _, k := range v.Kinds {
			if k.PollSeconds < 60 {
				t.Errorf("%s %s polled every %ds", v.Role, k.Kind, k.PollSeconds)
			}
		}
	}
	// Readiness says the plan as a short phrase of its own.
	app.firms[acme.ID] = &firmBackends{model: model, syncs: syncs}
	checks := app.syncChecks()
	if len(checks) != 2 {
		t.Fatalf("readiness: %+v", checks)
	}
	for _, c := range checks {
		if !strings.Contains(c.Detail, "; polls ") || !strings.Contains(c.Detail, "at most 1,250 for this sync") {
			t.Errorf("readiness of %s: %q", c.Name, c.Detail)
		}
	}
}
