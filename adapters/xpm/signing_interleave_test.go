package xpm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/adapters/xpm"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// A quote's signing is one engagement.signed however its reads reach the
// gateway: two instances sharing one state store, each restarted at
// random, read quotes while users accept them, take acceptances back,
// edit and decline them; every read is delivered late, out of order and
// some twice. After every schedule, each engagement has had exactly one
// engagement.signed recorded (the event log keeps an id once) if the
// gateway ever kept it becoming accepted, and none otherwise (one found
// accepted and never seen otherwise was signed before the gateway
// looked). A failing seed replays alone:
// go test -run TestSigningIsOnceUnderInterleavings/seed=N.
func TestSigningIsOnceUnderInterleavings(t *testing.T) {
	for seed := range 150 {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { signingSchedule(t, uint64(seed)) })
	}
}

func signingSchedule(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 33))
	ctx := context.Background()
	x := vendortest.StartXPM(t)
	clock := vendortest.NewClock(epoch)
	x.SetClock(clock.Now)
	const quotes = 3
	for i := range quotes {
		x.AddQuote(vendortest.XPMQuote{ID: fmt.Sprintf("Q%06d", i), Name: "Accounts", State: "Issued", ClientUUID: clientID(i),
			Date: epoch, Amount: "100.00"})
	}
	state := changes.NewMemoryState()
	open := func() *xpm.Adapter {
		a, err := xpm.New(xpm.Config{Firm: "frm_acme", TenantID: x.TenantID, BaseURL: x.URL,
			OAuth2: upstream.OAuth2Config{AccessToken: x.Token}, Upstream: upstream.Policy{RateLimit: -1}},
			upstream.Deps{Clock: clock, State: state})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	instances := []*xpm.Adapter{open(), open()}
	recorders := []*changes.Recorder{{State: state}, {State: state}}
	s := &sink{}
	type read struct {
		instance int
		id       string
		raw      json.RawMessage
	}
	var pending []read
	first := map[string]string{} // the status of the first state kept
	deliver := func(r read) {
		key := changes.StateKey(live, practice.Engagements, r.id)
		if prev, _ := state.Last(ctx, key); prev == nil {
			var e practice.Engagement
			_ = json.Unmarshal(r.raw, &e)
			first[r.id] = e.Status
		}
		if _, err := recorders[r.instance].Observe(ctx, s, changes.Observation{Tenant: live, Kind: practice.Engagements,
			ResourceID: r.id, After: r.raw}); err != nil {
			t.Fatal(err)
		}
	}
	var trace []string
	for range 120 {
		clock.Advance(time.Duration(1+rng.IntN(90)) * time.Second)
		q := fmt.Sprintf("Q%06d", rng.IntN(quotes))
		switch op := rng.IntN(10); {
		case op < 2:
			st := []string{"Accepted", "Issued", "Declined", "Accepted"}[rng.IntN(4)]
			x.EditQuote(q, func(xq *vendortest.XPMQuote) { xq.State = st })
			trace = append(trace, q+" "+st)
		case op < 3:
			x.EditQuote(q, func(xq *vendortest.XPMQuote) { xq.Amount = fmt.Sprintf("%d.00", 100+rng.IntN(50)) })
			trace = append(trace, q+" edited")
		case op < 6:
			i := rng.IntN(len(instances))
			raw, err := instances[i].Get(ctx, live, practice.Engagements, "eng_"+q)
			if err != nil {
				t.Fatal(err)
			}
			pending = append(pending, read{i, "eng_" + q, raw})
		case op < 9 && len(pending) > 0:
			// A read delivered late, in any order; sometimes again.
			j := rng.IntN(len(pending))
			deliver(pending[j])
			if rng.IntN(4) > 0 {
				pending = append(pending[:j], pending[j+1:]...)
			}
		case op == 9:
			i := rng.IntN(len(instances))
			instances[i], recorders[i] = open(), &changes.Recorder{State: state}
			trace = append(trace, fmt.Sprintf("instance %d restarted", i))
		}
	}
	for _, r := range pending {
		deliver(r)
	}
	// The vendor quiet, each instance reads each quote once more.
	for i := range instances {
		for q := range quotes {
			id := fmt.Sprintf("eng_Q%06d", q)
			raw, err := instances[i].Get(ctx, live, practice.Engagements, id)
			if err != nil {
				t.Fatal(err)
			}
			deliver(read{i, id, raw})
		}
	}

	// The event log records an event id once: count the ids.
	signed := map[string]int{}
	recorded := map[string]bool{}
	acceptedLater := map[string]bool{}
	for _, c := range s.all() {
		var before, after practice.Engagement
		_ = json.Unmarshal(c.Before, &before)
		if json.Unmarshal(c.After, &after) == nil && after.Status == "signed" && before.Status != "signed" {
			acceptedLater[c.ResourceID] = true
		}
		events, err := dispatcher.Derive(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.Event == dispatcher.EngagementSigned && !recorded[e.ID] {
				recorded[e.ID] = true
				signed[c.ResourceID]++
			}
		}
	}
	for q := range quotes {
		id := fmt.Sprintf("eng_Q%06d", q)
		want := 0
		if acceptedLater[id] {
			want = 1
		}
		if signed[id] != want {
			t.Fatalf("%s: %d engagement.signed, want %d (first kept %q)\ntrace: %v", id, signed[id], want, first[id], trace)
		}
	}
}
