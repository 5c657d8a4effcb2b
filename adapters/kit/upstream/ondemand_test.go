package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
)

// echoReader answers every record asked for.
type echoReader struct {
	practice.Reader
	gets int
}

func (r *echoReader) Get(_ context.Context, _ practice.Tenant, _ practice.Kind, id string) (json.RawMessage, error) {
	r.gets++
	return json.RawMessage(`{"id":"` + id + `"}`), nil
}

// Two instances serving one firm draw the reads' share from the one
// budget they share (Redis, in scale-out), per minute and per day.
func TestOnDemandShareIsSharedByInstances(t *testing.T) {
	clock := vendortest.NewClock(time.Unix(1_700_000_000, 0))
	client, err := upstream.NewClient(upstream.Options{System: "xero", BaseURL: "https://api.xero.example",
		Defaults:   upstream.Policy{RateLimit: 60, RatePeriod: upstream.Duration(time.Minute)},
		Allowances: []upstream.Allowance{{Limit: 5000, Per: 24 * time.Hour}}}, upstream.Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	budget := upstream.NewLocalBudget(clock)
	vendor := &echoReader{}
	instances := []*upstream.OnDemand{
		upstream.NewOnDemand(vendor, client, budget, "frm_acme/ledger"),
		upstream.NewOnDemand(vendor, client, budget, "frm_acme/ledger"),
	}
	ok := 0
	for minute := range 24 * 60 {
		for i := range 20 {
			_, err := instances[i%2].Get(context.Background(), practice.Tenant{Firm: "frm_acme"}, practice.Invoices, fmt.Sprintf("inv_%d_%d", minute, i))
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, practice.ErrUnavailable):
				t.Fatal(err)
			}
			if d, _ := practice.RetryAfter(err); err != nil && d <= 0 {
				t.Fatalf("a refused read says no Retry-After: %v", err)
			}
		}
		clock.Advance(time.Minute)
	}
	// A tenth of Xero's 5,000 a day: never more than 500 in the day, and
	// not much fewer when reads keep coming; two instances with a share
	// each would have let twice that through.
	if vendor.gets != ok || ok > 500 || ok < 450 {
		t.Errorf("%d reads reached the vendor in a day of 20 a minute, want at most 500", vendor.gets)
	}
}

// unusableReader answers every record with a payment it cannot find.
type unusableReader struct {
	practice.Reader
	gets int
}

func (r *unusableReader) Get(_ context.Context, _ practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	r.gets++
	return nil, practice.Unusable(k, id, "its payment", fmt.Errorf("GET /v3/Payments/P1: %w", practice.ErrNotFound))
}

// A record whose vendor answer cannot be used is remembered as a miss is:
// thirty reads of it ask the vendor once, each answered the same bad
// upstream answer (never a not-found), until MissTTL passes.
func TestOnDemandRemembersAnAnswerItCannotUse(t *testing.T) {
	clock := vendortest.NewClock(time.Unix(1_700_000_000, 0))
	client, err := upstream.NewClient(upstream.Options{System: "karbon", BaseURL: "https://api.karbon.example",
		Defaults: upstream.Policy{RateLimit: 120, RatePeriod: upstream.Duration(time.Minute)}}, upstream.Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	vendor := &unusableReader{}
	o := upstream.NewOnDemand(vendor, client, nil, "frm_acme/ledger")
	for range 30 {
		_, err := o.Get(context.Background(), practice.Tenant{Firm: "frm_acme"}, practice.Invoices, "inv_I1")
		var u *practice.UnusableError
		if !errors.As(err, &u) || errors.Is(err, practice.ErrNotFound) || !errors.Is(err, practice.ErrBadUpstream) {
			t.Fatalf("a read of an unusable record: %v", err)
		}
	}
	if vendor.gets != 1 {
		t.Fatalf("30 reads asked the vendor %d times, want once", vendor.gets)
	}
	clock.Advance(upstream.MissTTL + time.Second)
	o.Get(context.Background(), practice.Tenant{Firm: "frm_acme"}, practice.Invoices, "inv_I1")
	if vendor.gets != 2 {
		t.Fatalf("after MissTTL the vendor was asked %d times in all, want twice", vendor.gets)
	}
}
