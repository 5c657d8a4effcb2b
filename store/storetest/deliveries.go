// Package storetest holds one conformance suite per store interface, which
// every backend passes: store/bolt for a gateway alone,
// store/redis for processes sharing the work. Each suite exercises
// a store through the interfaces its consumer declares only, so that the
// backends cannot drift apart in what they promise.
//
// A backend's tests call each suite with a function that opens an empty
// store.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// OpenDeliveries returns an empty store's backends; the store is closed
// when t ends.
type OpenDeliveries func(t *testing.T) dispatcher.Backends

// Deliveries runs the webhook pipeline's conformance tests (events,
// endpoints, queues, attempts, retention) against stores from open.
func Deliveries(t *testing.T, open OpenDeliveries) {
	for _, tt := range []struct {
		name string
		fn   func(*testing.T, dispatcher.Backends)
	}{
		{"ClaimLeaseAndExpiry", testClaimLeaseAndExpiry},
		{"ClaimVisitsEndpointsByHeadWithinRoom", testClaimRoom},
		{"ClaimStopsAtMax", testClaimStopsAtMax},
		{"ClaimKeepsEachFirmWithinItsRoom", testClaimFirmRoom},
		{"ExpiredLeaseIsDueAgain", testExpiredLease},
		{"SnoozeHoldsAnEndpointBack", testSnooze},
		{"ReplayLeaseAndRequeue", testReplay},
		{"ConcurrentClaimsNeverShare", testConcurrentClaims},
		{"DeleteEndpointTakesItsDeliveries", testDeleteEndpoint},
		{"ClaimsCarryTheirEventIfAny", testClaimEvent},
		{"EventsAreRecordedOnce", testEventsOnce},
		{"EventsPageAndFilter", testEventsPaging},
		{"FilteredEventsScanABoundedStretch", testEventsScanBound},
		{"FeedFollowsRecordOrder", testFeed},
		{"FeedMissesNothingUnderConcurrentRecords", testFeedUnderConcurrentRecords},
		{"FeedPositionsArePerTenant", testFeedPositionsPerTenant},
		{"FeedTenantsMissNothingUnderConcurrentRecords", testFeedTenantsUnderConcurrentRecords},
		{"FeedSaysWhatWasTrimmedPast", testFeedTrimmedPastIsMissed},
		{"DeliveriesPageAndFilter", testDeliveriesPaging},
		{"Endpoints", testEndpoints},
		{"PruneRemovesOnlyOldFinishedRecords", testPrune},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

var (
	t0     = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	tenant = practice.Tenant{Firm: "frm_acme"}
	ctx    = context.Background()
)

func endpoint(t *testing.T, b dispatcher.Backends, id string) dispatcher.Endpoint {
	t.Helper()
	ep := dispatcher.Endpoint{ID: id, Firm: tenant.Firm, URL: "https://example.com/" + id, Events: []string{"*"},
		Status: dispatcher.EndpointEnabled, Secrets: []dispatcher.Secret{{Key: "whsec_AAAA"}}, CreatedAt: t0, UpdatedAt: t0}
	if err := b.Catalog.CreateEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	return ep
}

func delivery(id, endpointID string, due time.Time) dispatcher.Delivery {
	return dispatcher.Delivery{ID: id, EventID: "evt_" + id, Event: dispatcher.ClientCreated, EndpointID: endpointID,
		Firm: tenant.Firm, State: dispatcher.StatePending, Attempts: []dispatcher.Attempt{},
		NextAttemptAt: due, CreatedAt: due, UpdatedAt: due}
}

func enqueue(t *testing.T, b dispatcher.Backends, want int, ds ...dispatcher.Delivery) {
	t.Helper()
	n, err := b.Queue.Enqueue(ctx, ds)
	if err != nil || n != want {
		t.Fatalf("Enqueue = %d, %v; want %d", n, err, want)
	}
}

func claim(t *testing.T, b dispatcher.Backends, r dispatcher.ClaimRequest) ([]string, []dispatcher.Claim, time.Time) {
	t.Helper()
	if r.LeaseUntil.IsZero() {
		r.LeaseUntil = r.Now.Add(time.Minute)
	}
	if r.Max == 0 {
		r.Max = 100
	}
	if r.PerEndpoint == 0 {
		r.PerEndpoint = 100
	}
	claims, next, err := b.Queue.Claim(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range claims {
		ids = append(ids, c.Delivery.ID)
	}
	return ids, claims, next
}

func claimAll(t *testing.T, b dispatcher.Backends, now time.Time) ([]string, []dispatcher.Claim, time.Time) {
	t.Helper()
	return claim(t, b, dispatcher.ClaimRequest{Now: now})
}

func backlog(t *testing.T, b dispatcher.Backends) int64 {
	t.Helper()
	n, err := b.Queue.Backlog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func get(t *testing.T, b dispatcher.Backends, id string) dispatcher.Delivery {
	t.Helper()
	d, err := b.Deliveries.Delivery(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func attempt(n int, code int) *dispatcher.Attempt {
	return &dispatcher.Attempt{Number: n, Trigger: dispatcher.TriggerScheduled, StartedAt: t0, DurationMS: 12,
		ResponseCode: code, Error: fmt.Sprintf("the endpoint answered %d", code), ResponseExcerpt: `{"ok":false}`}
}

func sameAttempt(a, b dispatcher.Attempt) bool {
	return a.Number == b.Number && a.Trigger == b.Trigger && a.StartedAt.Equal(b.StartedAt) && a.DurationMS == b.DurationMS &&
		a.ResponseCode == b.ResponseCode && a.Error == b.Error && a.ResponseExcerpt == b.ResponseExcerpt
}

func testClaimLeaseAndExpiry(t *testing.T, b dispatcher.Backends) {
	endpoint(t, b, "we_a")
	endpoint(t, b, "we_b")
	enqueue(t, b, 3,
		delivery("dlv_2", "we_a", t0.Add(2*time.Second)),
		delivery("dlv_1", "we_b", t0.Add(time.Second)),
		delivery("dlv_3", "we_a", t0.Add(time.Hour)),
		delivery("dlv_x", "we_gone", t0), // its endpoint does not exist
	)
	enqueue(t, b, 0, delivery("dlv_1", "we_b", t0))
	if n := backlog(t, b); n != 3 {
		t.Fatalf("backlog %d, want 3", n)
	}
	if ids, _, next := claimAll(t, b, t0); len(ids) != 0 || !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("nothing due yet: claimed %v, next %s", ids, next)
	}
	// we_b has no room: only we_a's due delivery is taken.
	ids, claims, next := claim(t, b, dispatcher.ClaimRequest{Now: t0.Add(time.Minute), LeaseUntil: t0.Add(2 * time.Minute),
		Max: 10, PerEndpoint: 4, Room: map[string]int{"we_b": 0}})
	if !slices.Equal(ids, []string{"dlv_2"}) {
		t.Fatalf("claimed %v, want dlv_2", ids)
	}
	if !next.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("next = %s, want the lease's expiry (we_b was passed over, dlv_3 is due later)", next)
	}
	if c := claims[0]; c.Lease.Token == "" || !c.Lease.Until.Equal(t0.Add(2*time.Minute)) || c.Replay ||
		c.Delivery.Firm != tenant.Firm || c.Delivery.State != dispatcher.StatePending {
		t.Fatalf("claim %+v", c)
	}
	if n := backlog(t, b); n != 2 {
		t.Errorf("backlog %d with one leased, want 2", n)
	}
	// Leased: not claimable until the lease runs out, then claimable again.
	ids, leased, _ := claimAll(t, b, t0.Add(90*time.Second))
	if !slices.Equal(ids, []string{"dlv_1"}) {
		t.Fatalf("claimed %v, want only dlv_1", ids)
	}
	if _, err := b.Attempts.RecordAttempt(ctx, leased[0].Lease, dispatcher.Outcome{Attempt: attempt(1, 200),
		State: dispatcher.StateDelivered, At: t0.Add(90 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	ids, again, _ := claimAll(t, b, t0.Add(2*time.Minute))
	if !slices.Equal(ids, []string{"dlv_2"}) || again[0].Lease.Token == claims[0].Lease.Token {
		t.Fatalf("after expiry claimed %v", ids)
	}
	if _, err := b.Attempts.RecordAttempt(ctx, claims[0].Lease, dispatcher.Outcome{State: dispatcher.StateDelivered, At: t0}); !errors.Is(err, practice.ErrLeaseLost) {
		t.Fatalf("record with the expired lease: %v", err)
	}
	if _, err := b.Attempts.Lease(ctx, "dlv_2", t0.Add(2*time.Minute), t0.Add(3*time.Minute)); !errors.Is(err, practice.ErrBusy) {
		t.Fatalf("Lease while leased: %v", err)
	}

	// Retrying: the delivery is queued again at its next attempt, and the
	// attempt is logged with it.
	d, err := b.Attempts.RecordAttempt(ctx, again[0].Lease, dispatcher.Outcome{Attempt: attempt(1, 500), State: dispatcher.StateRetrying,
		NextAttemptAt: t0.Add(10 * time.Minute), At: t0.Add(2 * time.Minute)})
	if err != nil || d.State != dispatcher.StateRetrying || len(d.Attempts) != 1 || !d.NextAttemptAt.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("RecordAttempt = %+v, %v", d, err)
	}
	got := get(t, b, "dlv_2")
	if got.State != dispatcher.StateRetrying || !got.UpdatedAt.Equal(t0.Add(2*time.Minute)) || len(got.Attempts) != 1 ||
		!sameAttempt(got.Attempts[0], *attempt(1, 500)) {
		t.Fatalf("stored %+v", got)
	}
	if ids, _, _ := claimAll(t, b, t0.Add(9*time.Minute)); len(ids) != 0 {
		t.Fatalf("claimed %v before the retry was due", ids)
	}
	ids, leased, _ = claimAll(t, b, t0.Add(10*time.Minute))
	if !slices.Equal(ids, []string{"dlv_2"}) {
		t.Fatalf("claimed %v at the retry", ids)
	}
	// Released with notBefore: pushed back, no attempt spent.
	if err := b.Queue.Release(ctx, []dispatcher.Lease{leased[0].Lease}, t0.Add(20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if d := get(t, b, "dlv_2"); !d.NextAttemptAt.Equal(t0.Add(20*time.Minute)) || len(d.Attempts) != 1 {
		t.Fatalf("after release: next %s, %d attempts", d.NextAttemptAt, len(d.Attempts))
	}
	// Releasing again with the spent lease changes nothing.
	if err := b.Queue.Release(ctx, []dispatcher.Lease{leased[0].Lease}, t0.Add(40*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Final states leave the queue.
	ids, leased, _ = claimAll(t, b, t0.Add(20*time.Minute))
	if !slices.Equal(ids, []string{"dlv_2"}) {
		t.Fatalf("claimed %v after the release", ids)
	}
	if _, err := b.Attempts.RecordAttempt(ctx, leased[0].Lease, dispatcher.Outcome{Attempt: attempt(2, 500), State: dispatcher.StateFailed, At: t0}); err != nil {
		t.Fatal(err)
	}
	if d := get(t, b, "dlv_2"); d.State != dispatcher.StateFailed || !d.NextAttemptAt.IsZero() || len(d.Attempts) != 2 {
		t.Fatalf("failed delivery %+v", d)
	}
	ids, leased, _ = claimAll(t, b, t0.Add(1000*time.Hour))
	if !slices.Equal(ids, []string{"dlv_3"}) {
		t.Fatalf("claimed %v, want the last active delivery", ids)
	}
	if _, err := b.Attempts.RecordAttempt(ctx, leased[0].Lease, dispatcher.Outcome{Attempt: attempt(1, 200), State: dispatcher.StateDelivered, At: t0}); err != nil {
		t.Fatal(err)
	}
	if ids, _, next := claimAll(t, b, t0.Add(2000*time.Hour)); len(ids) != 0 || !next.IsZero() {
		t.Fatalf("claimed %v (next %s) with nothing active", ids, next)
	}
	if n := backlog(t, b); n != 0 {
		t.Fatalf("backlog %d with nothing waiting", n)
	}
}

func testClaimRoom(t *testing.T, b dispatcher.Backends) {
	endpoint(t, b, "we_busy")
	endpoint(t, b, "we_late")
	endpoint(t, b, "we_quiet")
	var ds []dispatcher.Delivery
	for i := range 50 {
		ds = append(ds, delivery(fmt.Sprintf("dlv_busy%02d", i), "we_busy", t0.Add(time.Duration(i)*time.Millisecond)))
	}
	ds = append(ds, delivery("dlv_late1", "we_late", t0.Add(time.Second)), delivery("dlv_late2", "we_late", t0.Add(2*time.Second)),
		delivery("dlv_quiet", "we_quiet", t0.Add(time.Hour)))
	enqueue(t, b, len(ds), ds...)

	// Each endpoint gets at most its room, earliest first; the backlog of
	// one does not hold up another.
	ids, _, _ := claim(t, b, dispatcher.ClaimRequest{Now: t0.Add(time.Minute), LeaseUntil: t0.Add(2 * time.Hour), Max: 100, PerEndpoint: 3})
	want := []string{"dlv_busy00", "dlv_busy01", "dlv_busy02", "dlv_late1", "dlv_late2"}
	if !slices.Equal(ids, want) {
		t.Fatalf("claimed %v, want %v", ids, want)
	}
	// An endpoint at its limit is passed over however long its queue.
	ids, _, next := claim(t, b, dispatcher.ClaimRequest{Now: t0.Add(time.Minute), Max: 100, PerEndpoint: 3,
		Room: map[string]int{"we_busy": 0}})
	if len(ids) != 0 || !next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("claimed %v, next %s; want nothing until we_quiet's delivery", ids, next)
	}
	ids, _, _ = claim(t, b, dispatcher.ClaimRequest{Now: t0.Add(time.Minute), LeaseUntil: t0.Add(2 * time.Hour), Max: 100, PerEndpoint: 3,
		Room: map[string]int{"we_busy": 1}})
	if !slices.Equal(ids, []string{"dlv_busy03"}) {
		t.Fatalf("claimed %v with room for one", ids)
	}
	if n := backlog(t, b); n != 47 {
		t.Errorf("backlog %d, want 47", n)
	}
}

// A firm's endpoints together get at most the firm's room, however many
// they are; other firms' deliveries are claimed meanwhile.
func testClaimFirmRoom(t *testing.T, b dispatcher.Backends) {
	other := practice.Tenant{Firm: "frm_birch"}
	for _, id := range []string{"we_a1", "we_a2", "we_a3"} {
		endpoint(t, b, id)
	}
	ep := dispatcher.Endpoint{ID: "we_b", Firm: other.Firm, URL: "https://example.com/we_b", Events: []string{"*"},
		Status: dispatcher.EndpointEnabled, Secrets: []dispatcher.Secret{{Key: "whsec_AAAA"}}, CreatedAt: t0, UpdatedAt: t0}
	if err := b.Catalog.CreateEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	var ds []dispatcher.Delivery
	for i := range 4 {
		for _, e := range []string{"we_a1", "we_a2", "we_a3"} {
			ds = append(ds, delivery(fmt.Sprintf("dlv_%s_%d", e, i), e, t0.Add(time.Duration(i)*time.Millisecond)))
		}
	}
	late := delivery("dlv_b", "we_b", t0.Add(time.Second))
	late.Firm = other.Firm
	ds = append(ds, late)
	enqueue(t, b, len(ds), ds...)

	firmOf := func(ids []string) (a, birch int) {
		for _, id := range ids {
			if id == "dlv_b" {
				birch++
			} else {
				a++
			}
		}
		return a, birch
	}
	ids, _, _ := claim(t, b, dispatcher.ClaimRequest{Now: t0.Add(time.Minute), LeaseUntil: t0.Add(time.Hour), PerEndpoint: 10, PerFirm: 5})
	if a, birch := firmOf(ids); a != 5 || birch != 1 {
		t.Fatalf("claimed %v: %d of frm_acme's and %d of frm_birch's, want 5 and 1", ids, a, birch)
	}
	// A firm at its room is passed over; one with room left gets that.
	ids, _, _ = claim(t, b, dispatcher.ClaimRequest{Now: t0.Add(time.Minute), LeaseUntil: t0.Add(time.Hour), PerEndpoint: 10, PerFirm: 5,
		FirmRoom: map[string]int{tenant.Firm: 0}})
	if len(ids) != 0 {
		t.Fatalf("claimed %v of a firm with no room", ids)
	}
	ids, _, _ = claim(t, b, dispatcher.ClaimRequest{Now: t0.Add(time.Minute), LeaseUntil: t0.Add(time.Hour), PerEndpoint: 10, PerFirm: 5,
		FirmRoom: map[string]int{tenant.Firm: 2}})
	if a, _ := firmOf(ids); a != 2 || len(ids) != 2 {
		t.Fatalf("claimed %v with room for two", ids)
	}
	// No bound: the rest.
	ids, _, _ = claim(t, b, dispatcher.ClaimRequest{Now: t0.Add(time.Minute), LeaseUntil: t0.Add(time.Hour), PerEndpoint: 10})
	if len(ids) != 5 {
		t.Fatalf("claimed %v without a firm bound, want the other 5", ids)
	}
}

func testClaimStopsAtMax(t *testing.T, b dispatcher.Backends) {
	endpoint(t, b, "we_a")
	endpoint(t, b, "we_b")
	var ds []dispatcher.Delivery
	for i := range 5 {
		ds = append(ds, delivery(fmt.Sprintf("dlv_a%d", i), "we_a", t0), delivery(fmt.Sprintf("dlv_b%d", i), "we_b", t0.Add(time.Millisecond)))
	}
	enqueue(t, b, 10, ds...)
	ids, _, next := claim(t, b, dispatcher.ClaimRequest{Now: t0.Add(time.Second), Max: 7, PerEndpoint: 10})
	if len(ids) != 7 || !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("claimed %d, next %s; want 7 and next = now", len(ids), next)
	}
	ids, _, _ = claim(t, b, dispatcher.ClaimRequest{Now: t0.Add(time.Second), Max: 7, PerEndpoint: 10})
	if len(ids) != 3 {
		t.Fatalf("claimed %d of the rest, want 3", len(ids))
	}
}

func testExpiredLease(t *testing.T, b dispatcher.Backends) {
	endpoint(t, b, "we_a")
	enqueue(t, b, 1, delivery("dlv_1", "we_a", t0))
	_, first, next := claim(t, b, dispatcher.ClaimRequest{Now: t0, LeaseUntil: t0.Add(30 * time.Second)})
	if len(first) != 1 || !next.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("claimed %d, next %s; want the lease's expiry next", len(first), next)
	}
	// A dispatcher that died holding it: after expiry another claims it,
	// however little room it has elsewhere, with a new token.
	if ids, _, _ := claimAll(t, b, t0.Add(29*time.Second)); len(ids) != 0 {
		t.Fatalf("claimed %v before expiry", ids)
	}
	ids, second, _ := claimAll(t, b, t0.Add(30*time.Second))
	if !slices.Equal(ids, []string{"dlv_1"}) || second[0].Lease.Token == first[0].Lease.Token {
		t.Fatalf("after expiry claimed %v", ids)
	}
	if _, err := b.Attempts.RecordAttempt(ctx, first[0].Lease, dispatcher.Outcome{State: dispatcher.StateDelivered, At: t0}); !errors.Is(err, practice.ErrLeaseLost) {
		t.Fatalf("the dead holder recorded: %v", err)
	}
	if _, err := b.Attempts.RecordAttempt(ctx, second[0].Lease, dispatcher.Outcome{Attempt: attempt(1, 200), State: dispatcher.StateDelivered, At: t0}); err != nil {
		t.Fatal(err)
	}
	// A replay lease on a final delivery that expires leaves it final.
	if _, err := b.Attempts.Lease(ctx, "dlv_1", t0.Add(time.Minute), t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if ids, _, _ := claimAll(t, b, t0.Add(3*time.Minute)); len(ids) != 0 {
		t.Fatalf("an expired replay lease queued %v", ids)
	}
	if d := get(t, b, "dlv_1"); d.State != dispatcher.StateDelivered {
		t.Fatalf("state %s", d.State)
	}
	if _, err := b.Attempts.Lease(ctx, "dlv_1", t0.Add(3*time.Minute), t0.Add(4*time.Minute)); err != nil {
		t.Fatalf("lease after the replay lease expired: %v", err)
	}
}

func testSnooze(t *testing.T, b dispatcher.Backends) {
	endpoint(t, b, "we_dead")
	endpoint(t, b, "we_ok")
	enqueue(t, b, 3, delivery("dlv_d1", "we_dead", t0), delivery("dlv_d2", "we_dead", t0.Add(time.Minute)),
		delivery("dlv_ok", "we_ok", t0.Add(time.Second)))
	until := t0.Add(10 * time.Minute)
	if err := b.Queue.Snooze(ctx, "we_dead", until); err != nil {
		t.Fatal(err)
	}
	ids, _, next := claim(t, b, dispatcher.ClaimRequest{Now: t0.Add(5 * time.Minute), LeaseUntil: t0.Add(time.Hour)})
	if !slices.Equal(ids, []string{"dlv_ok"}) || !next.Equal(until) {
		t.Fatalf("claimed %v, next %s; want dlv_ok, then the snooze's end", ids, next)
	}
	// Readers see when the snoozed deliveries will go.
	for _, id := range []string{"dlv_d1", "dlv_d2"} {
		if d := get(t, b, id); !d.NextAttemptAt.Equal(until) {
			t.Errorf("%s next attempt %s, want %s", id, d.NextAttemptAt, until)
		}
	}
	page, err := b.Deliveries.Deliveries(ctx, dispatcher.DeliveryQuery{EndpointID: "we_dead", Limit: 10})
	if err != nil || len(page.Deliveries) != 2 || !page.Deliveries[0].NextAttemptAt.Equal(until) {
		t.Fatalf("page %+v, %v", page, err)
	}
	// New deliveries to a snoozed endpoint wait too.
	enqueue(t, b, 1, delivery("dlv_d3", "we_dead", t0.Add(6*time.Minute)))
	if ids, _, _ := claimAll(t, b, t0.Add(9*time.Minute)); len(ids) != 0 {
		t.Fatalf("claimed %v while snoozed", ids)
	}
	ids, _, _ = claim(t, b, dispatcher.ClaimRequest{Now: until, LeaseUntil: until.Add(24 * time.Hour)})
	if !slices.Equal(ids, []string{"dlv_d1", "dlv_d2", "dlv_d3"}) {
		t.Fatalf("after the snooze claimed %v", ids)
	}
	// Lifting a snooze early frees the queue at once.
	enqueue(t, b, 1, delivery("dlv_d4", "we_dead", until))
	if err := b.Queue.Snooze(ctx, "we_dead", until.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ids, _, _ := claimAll(t, b, until.Add(time.Minute)); len(ids) != 0 {
		t.Fatalf("claimed %v while snoozed again", ids)
	}
	if err := b.Queue.Snooze(ctx, "we_dead", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if ids, _, _ := claimAll(t, b, until.Add(time.Minute)); !slices.Equal(ids, []string{"dlv_d4"}) {
		t.Fatalf("after lifting the snooze claimed %v", ids)
	}
	// Snoozing an endpoint that is gone is not an error.
	if err := b.Queue.Snooze(ctx, "we_never", until); err != nil {
		t.Fatal(err)
	}
}

func testReplay(t *testing.T, b dispatcher.Backends) {
	endpoint(t, b, "we_a")
	for i := range 3 {
		enqueue(t, b, 1, delivery(fmt.Sprintf("dlv_%d", i), "we_a", t0.Add(time.Duration(i)*time.Hour)))
	}
	// All three fail.
	for i := range 3 {
		_, cs, _ := claimAll(t, b, t0.Add(time.Duration(i)*time.Hour))
		if len(cs) != 1 {
			t.Fatalf("claim %d: %d", i, len(cs))
		}
		if _, err := b.Attempts.RecordAttempt(ctx, cs[0].Lease, dispatcher.Outcome{Attempt: attempt(1, 500), State: dispatcher.StateFailed, At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	// A replay by hand leases one whatever its state.
	c, err := b.Attempts.Lease(ctx, "dlv_0", t0.Add(3*time.Hour), t0.Add(3*time.Hour+time.Minute))
	if err != nil || c.Delivery.State != dispatcher.StateFailed || len(c.Delivery.Attempts) != 1 {
		t.Fatalf("Lease = %+v, %v", c, err)
	}
	// Bulk replay since the second one's creation skips the first (and the
	// leased one, which is older anyway).
	n, err := b.Attempts.RequeueFailed(ctx, "we_a", t0.Add(time.Hour), t0.Add(3*time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("RequeueFailed = %d, %v; want 2", n, err)
	}
	if n, _ := b.Attempts.RequeueFailed(ctx, "we_a", t0, t0.Add(3*time.Hour)); n != 0 {
		t.Fatalf("requeued %d again (one is leased, two are queued already)", n)
	}
	if d := get(t, b, "dlv_1"); d.State != dispatcher.StateFailed || !d.NextAttemptAt.Equal(t0.Add(3*time.Hour)) {
		t.Fatalf("requeued delivery %+v: stays failed until its replay", d)
	}
	ids, cs, _ := claimAll(t, b, t0.Add(3*time.Hour))
	if !slices.Equal(ids, []string{"dlv_1", "dlv_2"}) || !cs[0].Replay || !cs[1].Replay {
		t.Fatalf("replay claims %v %+v", ids, cs)
	}
	for _, c := range cs {
		a := attempt(2, 200)
		a.Trigger = dispatcher.TriggerReplay
		if _, err := b.Attempts.RecordAttempt(ctx, c.Lease, dispatcher.Outcome{Attempt: a, State: dispatcher.StateDelivered, At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Attempts.RecordAttempt(ctx, c.Lease, dispatcher.Outcome{Attempt: attempt(2, 200), State: dispatcher.StateDelivered, At: t0}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if d := get(t, b, fmt.Sprintf("dlv_%d", i)); d.State != dispatcher.StateDelivered || len(d.Attempts) != 2 {
			t.Errorf("dlv_%d: %s with %d attempts", i, d.State, len(d.Attempts))
		}
	}
	if ids, _, _ := claimAll(t, b, t0.Add(100*time.Hour)); len(ids) != 0 {
		t.Fatalf("claimed %v after every replay", ids)
	}
	if _, err := b.Attempts.Lease(ctx, "dlv_missing", t0, t0.Add(time.Minute)); !errors.Is(err, dispatcher.ErrNotFound) {
		t.Fatalf("Lease of a missing delivery: %v", err)
	}
}

// Claimers racing over one queue (dispatchers sharing a store) never get
// the same delivery while its lease holds.
func testConcurrentClaims(t *testing.T, b dispatcher.Backends) {
	const endpoints, per = 4, 100
	var ds []dispatcher.Delivery
	for e := range endpoints {
		id := fmt.Sprintf("we_%d", e)
		endpoint(t, b, id)
		for i := range per {
			ds = append(ds, delivery(fmt.Sprintf("dlv_%d_%03d", e, i), id, t0.Add(time.Duration(i)*time.Millisecond)))
		}
	}
	enqueue(t, b, len(ds), ds...)
	var (
		mu  sync.Mutex
		got = map[string]int{}
		wg  sync.WaitGroup
	)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				claims, _, err := b.Queue.Claim(ctx, dispatcher.ClaimRequest{Now: t0.Add(time.Second), LeaseUntil: t0.Add(time.Hour),
					Max: 7, PerEndpoint: 3})
				if err != nil {
					t.Error(err)
					return
				}
				if len(claims) == 0 {
					return
				}
				for _, c := range claims {
					if _, err := b.Attempts.RecordAttempt(ctx, c.Lease, dispatcher.Outcome{Attempt: attempt(1, 200),
						State: dispatcher.StateDelivered, At: t0}); err != nil {
						t.Error(err)
					}
					mu.Lock()
					got[c.Delivery.ID]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(got) != len(ds) {
		t.Fatalf("%d deliveries claimed, want %d", len(got), len(ds))
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("%s claimed %d times", id, n)
		}
	}
	if n := backlog(t, b); n != 0 {
		t.Errorf("backlog %d", n)
	}
}

func testDeleteEndpoint(t *testing.T, b dispatcher.Backends) {
	endpoint(t, b, "we_a")
	endpoint(t, b, "we_b")
	enqueue(t, b, 3, delivery("dlv_a", "we_a", t0), delivery("dlv_a2", "we_a", t0), delivery("dlv_b", "we_b", t0))
	// One of we_a's is leased and one snoozed when it goes.
	if ids, _, _ := claim(t, b, dispatcher.ClaimRequest{Now: t0, Max: 1, PerEndpoint: 1}); !slices.Equal(ids, []string{"dlv_a"}) {
		t.Fatalf("claimed %v", ids)
	}
	if err := b.Queue.Snooze(ctx, "we_a", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := b.Catalog.DeleteEndpoint(ctx, "we_a"); err != nil {
		t.Fatal(err)
	}
	if err := b.Catalog.DeleteEndpoint(ctx, "we_a"); !errors.Is(err, dispatcher.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	for _, id := range []string{"dlv_a", "dlv_a2"} {
		if _, err := b.Deliveries.Delivery(ctx, id); !errors.Is(err, dispatcher.ErrNotFound) {
			t.Fatalf("delivery of a deleted endpoint: %v", err)
		}
	}
	if ids, _, _ := claimAll(t, b, t0.Add(2*time.Minute)); !slices.Equal(ids, []string{"dlv_b"}) {
		t.Fatalf("claimed %v", ids)
	}
	if n := backlog(t, b); n != 0 {
		t.Errorf("backlog %d", n)
	}
	eps, err := b.Endpoints.Endpoints(ctx, tenant)
	if err != nil || len(eps) != 1 || eps[0].ID != "we_b" || len(eps[0].Secrets) != 1 {
		t.Fatalf("endpoints %+v, %v", eps, err)
	}
	page, err := b.Deliveries.Deliveries(ctx, dispatcher.DeliveryQuery{EndpointID: "we_a", Limit: 10})
	if err != nil || len(page.Deliveries) != 0 {
		t.Fatalf("deliveries of a deleted endpoint: %+v, %v", page, err)
	}
	// Deliveries for it are refused from now on.
	enqueue(t, b, 0, delivery("dlv_a3", "we_a", t0))
}

func event(changeID string, kind string, at time.Time, t practice.Tenant) dispatcher.Event {
	return dispatcher.Event{ID: dispatcher.EventID(changeID, kind, at), Event: kind, OccurredAt: at, Firm: t.Firm,
		Sandbox: t.Sandbox, Data: json.RawMessage(`{"client_id":"cli_1","name":"A & B <Ltd>","n":1.50}`), ResourceID: "cli_1"}
}

func testEventsOnce(t *testing.T, b dispatcher.Backends) {
	ev := event("chg_1", dispatcher.ClientCreated, t0, tenant)
	other := event("chg_2", dispatcher.ClientUpdated, t0, tenant)
	created, err := b.Events.Record(ctx, []dispatcher.Event{ev, ev})
	if err != nil || !slices.Equal(created, []bool{true, false}) {
		t.Fatalf("Record = %v, %v; want the second copy skipped", created, err)
	}
	created, err = b.Events.Record(ctx, []dispatcher.Event{other, ev})
	if err != nil || !slices.Equal(created, []bool{true, false}) {
		t.Fatalf("Record again = %v, %v", created, err)
	}
	got, err := b.Events.Event(ctx, ev.ID)
	if err != nil || got.ResourceID != "cli_1" || string(got.Data) != string(ev.Data) || !got.OccurredAt.Equal(t0) ||
		got.Firm != ev.Firm || got.Event != ev.Event {
		t.Fatalf("Event = %+v, %v", got, err)
	}
	if _, err := b.Events.Event(ctx, "evt_missing"); !errors.Is(err, dispatcher.ErrNotFound) {
		t.Fatalf("missing event: %v", err)
	}
	if created, err := b.Events.Record(ctx, nil); err != nil || len(created) != 0 {
		t.Fatalf("Record(nil) = %v, %v", created, err)
	}
}

func testEventsPaging(t *testing.T, b dispatcher.Backends) {
	sandbox := practice.Tenant{Firm: tenant.Firm, Sandbox: true}
	var all []dispatcher.Event
	var want []string
	for i := range 9 {
		kind := dispatcher.ClientCreated
		if i%3 == 1 {
			kind = dispatcher.JobOpened
		}
		ev := event(fmt.Sprintf("chg_%d", i), kind, t0.Add(time.Duration(i)*time.Hour), tenant)
		all = append(all, ev)
		want = append(want, ev.ID)
	}
	all = append(all, event("chg_s", dispatcher.ClientCreated, t0, sandbox))
	if _, err := b.Events.Record(ctx, all); err != nil {
		t.Fatal(err)
	}
	got := eventIDs(t, b, dispatcher.EventQuery{Tenant: tenant, Limit: 4})
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v\nwant %v", got, want)
	}
	ids := func(q dispatcher.EventQuery) []string {
		t.Helper()
		page, err := b.Events.Events(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ev := range page.Events {
			out = append(out, ev.ID)
		}
		return out
	}
	if got := ids(dispatcher.EventQuery{Tenant: tenant, Kinds: []string{dispatcher.JobOpened}, Limit: 2}); !slices.Equal(got, []string{want[1], want[4]}) {
		t.Errorf("by kind %v", got)
	}
	if got := ids(dispatcher.EventQuery{Tenant: tenant, From: t0.Add(2 * time.Hour), To: t0.Add(5 * time.Hour), Limit: 50}); !slices.Equal(got, want[2:5]) {
		t.Errorf("window %v, want %v", got, want[2:5])
	}
	if got := ids(dispatcher.EventQuery{Tenant: tenant, Cursor: want[6], Limit: 50}); !slices.Equal(got, want[7:]) {
		t.Errorf("after cursor %v", got)
	}
	if got := ids(dispatcher.EventQuery{Tenant: sandbox, Limit: 50}); len(got) != 1 {
		t.Errorf("sandbox %v", got)
	}
	if _, err := b.Events.Events(ctx, dispatcher.EventQuery{Tenant: tenant, Cursor: "bogus"}); !errors.Is(err, practice.ErrInvalidCursor) {
		t.Errorf("bogus cursor: %v", err)
	}
}

func testDeliveriesPaging(t *testing.T, b dispatcher.Backends) {
	endpoint(t, b, "we_a")
	endpoint(t, b, "we_b")
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("dlv_%02d", i)
		want = append(want, id)
		enqueue(t, b, 1, delivery(id, "we_a", t0.Add(time.Duration(i)*time.Minute)))
	}
	enqueue(t, b, 1, delivery("dlv_b", "we_b", t0))
	// Two of them delivered, one failed.
	_, cs, _ := claim(t, b, dispatcher.ClaimRequest{Now: t0.Add(2 * time.Minute), Max: 3, Room: map[string]int{"we_b": 0}})
	states := []dispatcher.State{dispatcher.StateDelivered, dispatcher.StateFailed, dispatcher.StateDelivered}
	if len(cs) != 3 {
		t.Fatalf("claimed %d", len(cs))
	}
	for i, c := range cs {
		if _, err := b.Attempts.RecordAttempt(ctx, c.Lease, dispatcher.Outcome{Attempt: attempt(1, 200), State: states[i], At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, d := range allDeliveries(t, b, dispatcher.DeliveryQuery{EndpointID: "we_a", Limit: 3}) {
		got = append(got, d.ID)
		if d.EndpointID != "we_a" || d.Firm != tenant.Firm {
			t.Errorf("delivery %+v", d)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	page, err := b.Deliveries.Deliveries(ctx, dispatcher.DeliveryQuery{EndpointID: "we_a",
		States: []dispatcher.State{dispatcher.StatePending, dispatcher.StateFailed}, Limit: 3})
	if err != nil || !page.HasMore || len(page.Deliveries) != 3 {
		t.Fatalf("pending or failed: %+v, %v", page, err)
	}
	var stateIDs []string
	for _, d := range page.Deliveries {
		stateIDs = append(stateIDs, d.ID)
	}
	page2, err := b.Deliveries.Deliveries(ctx, dispatcher.DeliveryQuery{EndpointID: "we_a",
		States: []dispatcher.State{dispatcher.StatePending, dispatcher.StateFailed}, Limit: 3, Cursor: page.Next})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range page2.Deliveries {
		stateIDs = append(stateIDs, d.ID)
	}
	var wantStates []string
	for _, id := range want {
		if s := get(t, b, id).State; s == dispatcher.StatePending || s == dispatcher.StateFailed {
			wantStates = append(wantStates, id)
		}
	}
	if !slices.Equal(stateIDs, wantStates) || len(wantStates) != 5 {
		t.Fatalf("by state %v, want %v", stateIDs, wantStates)
	}
	page, err = b.Deliveries.Deliveries(ctx, dispatcher.DeliveryQuery{EndpointID: "we_a",
		From: t0.Add(2 * time.Minute), To: t0.Add(5 * time.Minute), Limit: 50})
	if err != nil || len(page.Deliveries) != 3 || page.Deliveries[0].ID != "dlv_02" || page.HasMore {
		t.Fatalf("window %+v, %v", page, err)
	}
	if _, err := b.Deliveries.Deliveries(ctx, dispatcher.DeliveryQuery{EndpointID: "we_a", Cursor: "bogus"}); !errors.Is(err, practice.ErrInvalidCursor) {
		t.Errorf("bogus cursor: %v", err)
	}
}

func testEndpoints(t *testing.T, b dispatcher.Backends) {
	a := endpoint(t, b, "we_1")
	endpoint(t, b, "we_2")
	if err := b.Catalog.CreateEndpoint(ctx, a); !errors.Is(err, practice.ErrConflict) {
		t.Fatalf("creating twice: %v", err)
	}
	got, err := b.Endpoints.Endpoint(ctx, "we_1")
	if err != nil || got.Firm != tenant.Firm || got.URL != a.URL || len(got.Secrets) != 1 || got.Secrets[0].Key != "whsec_AAAA" {
		t.Fatalf("Endpoint = %+v, %v", got, err)
	}
	up, err := b.Endpoints.UpdateEndpoint(ctx, "we_1", func(ep *dispatcher.Endpoint) error {
		ep.Status = dispatcher.EndpointDisabled
		ep.DisabledReason = "410"
		ep.Firm = "frm_other" // not movable
		return nil
	})
	if err != nil || up.Status != dispatcher.EndpointDisabled || up.Firm != tenant.Firm {
		t.Fatalf("UpdateEndpoint = %+v, %v", up, err)
	}
	if got, _ := b.Endpoints.Endpoint(ctx, "we_1"); got.Status != dispatcher.EndpointDisabled || got.DisabledReason != "410" {
		t.Fatalf("stored %+v", got)
	}
	refused := errors.New("no")
	if _, err := b.Endpoints.UpdateEndpoint(ctx, "we_1", func(*dispatcher.Endpoint) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("refused update: %v", err)
	}
	if _, err := b.Endpoints.UpdateEndpoint(ctx, "we_none", func(*dispatcher.Endpoint) error { return nil }); !errors.Is(err, dispatcher.ErrNotFound) {
		t.Fatalf("update of a missing endpoint: %v", err)
	}
	eps, err := b.Endpoints.Endpoints(ctx, tenant)
	if err != nil || len(eps) != 2 || eps[0].ID != "we_1" || eps[1].ID != "we_2" {
		t.Fatalf("Endpoints = %+v, %v", eps, err)
	}
	if eps, _ := b.Endpoints.Endpoints(ctx, practice.Tenant{Firm: tenant.Firm, Sandbox: true}); len(eps) != 0 {
		t.Fatalf("sandbox endpoints %+v", eps)
	}
	if _, err := b.Endpoints.Endpoint(ctx, "we_none"); !errors.Is(err, dispatcher.ErrNotFound) {
		t.Fatalf("missing endpoint: %v", err)
	}
}

// A store may read a claimed delivery's event with the claim; if it does,
// it is the event recorded.
func testClaimEvent(t *testing.T, b dispatcher.Backends) {
	endpoint(t, b, "we_a")
	ev := event("chg_1", dispatcher.ClientCreated, t0, tenant)
	if _, err := b.Events.Record(ctx, []dispatcher.Event{ev}); err != nil {
		t.Fatal(err)
	}
	d := delivery("dlv_1", "we_a", t0)
	d.EventID = ev.ID
	enqueue(t, b, 1, d)
	_, cs, _ := claimAll(t, b, t0)
	if len(cs) != 1 {
		t.Fatalf("claimed %d", len(cs))
	}
	if got := cs[0].Event; got != nil && (got.ID != ev.ID || string(got.Data) != string(ev.Data) || got.ResourceID != ev.ResourceID) {
		t.Fatalf("claim carries %+v, want %+v", got, ev)
	}
}

// finish claims the delivery (due by at) and records one attempt that
// leaves it in state.
func finish(t *testing.T, b dispatcher.Backends, id string, at time.Time, state dispatcher.State) {
	t.Helper()
	c, err := b.Attempts.Lease(ctx, id, at, at.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	code := 200
	if state != dispatcher.StateDelivered {
		code = 500
	}
	o := dispatcher.Outcome{Attempt: attempt(1, code), State: state, At: at}
	if state.Active() {
		o.NextAttemptAt = at.Add(time.Hour)
	}
	if _, err := b.Attempts.RecordAttempt(ctx, c.Lease, o); err != nil {
		t.Fatal(err)
	}
}

// prune runs Prune step by step until it is done, checking that no step
// looks at more than max records, and returns the total removed.
func prune(t *testing.T, b dispatcher.Backends, before time.Time, max int) (events, deliveries int) {
	t.Helper()
	r := dispatcher.PruneRequest{Before: before, Max: max}
	for steps := 0; ; steps++ {
		if steps > 100 {
			t.Fatal("Prune never finished")
		}
		res, err := b.Pruner.Prune(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if res.Events+res.Deliveries > max {
			t.Fatalf("one step removed %d events and %d deliveries; max %d", res.Events, res.Deliveries, max)
		}
		events, deliveries = events+res.Events, deliveries+res.Deliveries
		if res.Next == "" {
			return events, deliveries
		}
		r.Cursor = res.Next
	}
}

// Pruning removes old finished deliveries and the old events nothing
// refers to any more, keeps whatever may still be sent, and leaves the
// listings and their cursors consistent.
func testPrune(t *testing.T, b dispatcher.Backends) {
	if b.Pruner == nil {
		t.Skip("the store does not prune")
	}
	a, other := endpoint(t, b, "we_a"), endpoint(t, b, "we_b")
	before := t0.Add(10 * 24 * time.Hour)
	late := before.Add(24 * time.Hour)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }

	var old []dispatcher.Event
	for i := range 8 {
		old = append(old, event(fmt.Sprintf("chg_old_%d", i), dispatcher.ClientCreated, at(i), tenant))
	}
	fresh := []dispatcher.Event{
		event("chg_new_0", dispatcher.ClientUpdated, late, tenant),
		event("chg_new_1", dispatcher.ClientUpdated, late.Add(time.Minute), tenant),
	}
	if _, err := b.Events.Record(ctx, append(append([]dispatcher.Event{}, old...), fresh...)); err != nil {
		t.Fatal(err)
	}
	// A listing page taken before pruning, whose cursor is then pruned.
	page, err := b.Events.Events(ctx, dispatcher.EventQuery{Tenant: tenant, Limit: 2})
	if err != nil || page.Next != old[1].ID {
		t.Fatalf("first page of events: next %q, %v", page.Next, err)
	}
	eventCursor := page.Next

	// old[0..3]: delivered or failed long ago, to we_a (old[0] to we_b as
	// well); old[4]: still retrying; old[5]: failed, and leased for a
	// replay; old[6]: no delivery; old[7]: fanned out only after the
	// horizon (an endpoint subscribed late, a change read again), delivered.
	dl := map[string]string{} // event id -> its delivery to we_a
	fan := func(ev dispatcher.Event, eps []dispatcher.Endpoint, now time.Time) {
		ds := dispatcher.FanOut(ev, eps, now)
		enqueue(t, b, len(ds), ds...)
		dl[ev.ID] = ds[0].ID
	}
	fan(old[0], []dispatcher.Endpoint{a, other}, at(0))
	for i := 1; i < 6; i++ {
		fan(old[i], []dispatcher.Endpoint{a}, at(i))
	}
	fan(old[7], []dispatcher.Endpoint{a}, late)
	for _, ev := range fresh {
		fan(ev, []dispatcher.Endpoint{a}, ev.OccurredAt)
	}
	toOther := dispatcher.FanOut(old[0], []dispatcher.Endpoint{other}, at(0))[0].ID
	finish(t, b, toOther, at(0), dispatcher.StateDelivered)
	for i, st := range []dispatcher.State{dispatcher.StateDelivered, dispatcher.StateDelivered, dispatcher.StateFailed,
		dispatcher.StateFailed, dispatcher.StateRetrying, dispatcher.StateFailed} {
		finish(t, b, dl[old[i].ID], at(i), st)
	}
	finish(t, b, dl[old[7].ID], late, dispatcher.StateDelivered)
	finish(t, b, dl[fresh[0].ID], late, dispatcher.StateDelivered)
	replaying := dl[old[5].ID]
	if _, err := b.Attempts.Lease(ctx, replaying, before, before.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	dpage, err := b.Deliveries.Deliveries(ctx, dispatcher.DeliveryQuery{EndpointID: "we_a", Limit: 1})
	if err != nil || !dpage.HasMore {
		t.Fatalf("first page of deliveries: %+v, %v", dpage, err)
	}
	deliveryCursor := dpage.Next
	backlogBefore := backlog(t, b)

	events, deliveries := prune(t, b, before, 3)
	if events != 5 || deliveries != 5 {
		t.Fatalf("pruned %d events and %d deliveries; want 5 and 5", events, deliveries)
	}
	for _, id := range []string{dl[old[0].ID], toOther, dl[old[1].ID], dl[old[2].ID], dl[old[3].ID]} {
		if _, err := b.Deliveries.Delivery(ctx, id); !errors.Is(err, dispatcher.ErrNotFound) {
			t.Errorf("pruned delivery %s: %v", id, err)
		}
	}
	for _, id := range []string{dl[old[4].ID], replaying, dl[old[7].ID], dl[fresh[0].ID], dl[fresh[1].ID]} {
		if _, err := b.Deliveries.Delivery(ctx, id); err != nil {
			t.Errorf("kept delivery %s: %v", id, err)
		}
	}
	for i, ev := range old {
		_, err := b.Events.Event(ctx, ev.ID)
		referred := i == 4 || i == 5 || i == 7
		if referred && err != nil {
			t.Errorf("old event %d, which a kept delivery needs: %v", i, err)
		}
		if !referred && !errors.Is(err, dispatcher.ErrNotFound) {
			t.Errorf("old event %d: %v; want it pruned", i, err)
		}
	}
	if got := backlog(t, b); got != backlogBefore {
		t.Errorf("backlog %d after pruning, was %d", got, backlogBefore)
	}

	// Listings hold only what is left, and cursors issued before still
	// work.
	wantEvents := []string{old[4].ID, old[5].ID, old[7].ID, fresh[0].ID, fresh[1].ID}
	if got := eventIDs(t, b, dispatcher.EventQuery{Tenant: tenant, Limit: 2}); !slices.Equal(got, wantEvents) {
		t.Errorf("events after pruning %v\nwant %v", got, wantEvents)
	}
	page, err = b.Events.Events(ctx, dispatcher.EventQuery{Tenant: tenant, Cursor: eventCursor, Limit: 50})
	if err != nil || len(page.Events) != len(wantEvents) || page.Events[0].ID != wantEvents[0] {
		t.Errorf("events after a pruned cursor: %+v, %v", page, err)
	}
	wantDeliveries := []string{dl[old[4].ID], replaying, dl[old[7].ID], dl[fresh[0].ID], dl[fresh[1].ID]}
	var got []string
	for _, d := range allDeliveries(t, b, dispatcher.DeliveryQuery{EndpointID: "we_a", Limit: 2}) {
		got = append(got, d.ID)
	}
	if !slices.Equal(got, wantDeliveries) {
		t.Errorf("deliveries after pruning %v\nwant %v", got, wantDeliveries)
	}
	dpage, err = b.Deliveries.Deliveries(ctx, dispatcher.DeliveryQuery{EndpointID: "we_a", Cursor: deliveryCursor, Limit: 50})
	if err != nil || len(dpage.Deliveries) != len(wantDeliveries) {
		t.Errorf("deliveries after a pruned cursor: %d, %v", len(dpage.Deliveries), err)
	}
	for _, st := range []dispatcher.State{dispatcher.StateDelivered, dispatcher.StateFailed} {
		page, err := b.Deliveries.Deliveries(ctx, dispatcher.DeliveryQuery{EndpointID: "we_a", States: []dispatcher.State{st}, Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Deliveries {
			if d.CreatedAt.Before(before) && d.ID != replaying {
				t.Errorf("%s listing still holds %s", st, d.ID)
			}
		}
	}
	page2, err := b.Deliveries.Deliveries(ctx, dispatcher.DeliveryQuery{EndpointID: "we_b", Limit: 50})
	if err != nil || len(page2.Deliveries) != 0 {
		t.Errorf("we_b's deliveries after pruning: %+v, %v", page2, err)
	}

	// A change read again after its event was pruned raises nothing: the
	// event is not recorded afresh and its deliveries are not queued again.
	created, err := b.Events.Record(ctx, []dispatcher.Event{old[0], event("chg_other", dispatcher.ClientCreated, late, tenant)})
	if err != nil || !slices.Equal(created, []bool{false, true}) {
		t.Errorf("Record of a pruned event = %v, %v; want it refused", created, err)
	}
	if n, err := b.Queue.Enqueue(ctx, dispatcher.FanOut(old[0], []dispatcher.Endpoint{a, other}, late)); err != nil || n != 0 {
		t.Errorf("Enqueue of a pruned event's deliveries = %d, %v; want none", n, err)
	}
	if _, err := b.Events.Event(ctx, old[0].ID); !errors.Is(err, dispatcher.ErrNotFound) {
		t.Errorf("pruned event after it was read again: %v", err)
	}

	// Pruning again is harmless; once the replay is done, its delivery and
	// then its event go too.
	if events, deliveries := prune(t, b, before, 3); events != 0 || deliveries != 0 {
		t.Errorf("pruning again removed %d events and %d deliveries", events, deliveries)
	}
	c, err := b.Attempts.Lease(ctx, replaying, before.Add(2*time.Minute), before.Add(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	a2 := attempt(2, 200)
	a2.Trigger = dispatcher.TriggerReplay
	if _, err := b.Attempts.RecordAttempt(ctx, c.Lease, dispatcher.Outcome{Attempt: a2, State: dispatcher.StateDelivered, At: before}); err != nil {
		t.Fatal(err)
	}
	if events, deliveries := prune(t, b, before, 1); events != 1 || deliveries != 1 {
		t.Errorf("after the replay pruning removed %d events and %d deliveries; want 1 and 1", events, deliveries)
	}
	if _, err := b.Events.Event(ctx, old[4].ID); err != nil {
		t.Errorf("the retrying delivery's event: %v", err)
	}
}

// eventIDs pages through the events q selects, following each page's
// cursor, and returns their ids in order.
func eventIDs(t *testing.T, b dispatcher.Backends, q dispatcher.EventQuery) []string {
	t.Helper()
	var ids []string
	for {
		page, err := b.Events.Events(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Events {
			ids = append(ids, ev.ID)
		}
		if !page.HasMore {
			return ids
		}
		q.Cursor = page.Next
	}
}

// allDeliveries pages through the deliveries q selects, following each
// page's cursor.
func allDeliveries(t *testing.T, b dispatcher.Backends, q dispatcher.DeliveryQuery) []dispatcher.Delivery {
	t.Helper()
	var all []dispatcher.Delivery
	for {
		page, err := b.Deliveries.Deliveries(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Deliveries...)
		if !page.HasMore {
			return all
		}
		q.Cursor = page.Next
	}
}

// A filter that matches rarely over a long history reads a bounded stretch
// of the index per page and pages on from where it stopped, so that no
// request scans everything; paging to the end still finds every match,
// once and in order.
func testEventsScanBound(t *testing.T, b dispatcher.Backends) {
	var evs []dispatcher.Event
	var want []string
	for i := range 47 {
		kind := dispatcher.ClientUpdated
		if i == 5 || i == 31 || i == 32 {
			kind = dispatcher.InvoicePaid
		}
		ev := event(fmt.Sprintf("chg_s%02d", i), kind, t0.Add(time.Duration(i)*time.Second), tenant)
		evs = append(evs, ev)
		if kind == dispatcher.InvoicePaid {
			want = append(want, ev.ID)
		}
	}
	if _, err := b.Events.Record(ctx, evs); err != nil {
		t.Fatal(err)
	}
	var got []string
	pages := 0
	q := dispatcher.EventQuery{Tenant: tenant, Kinds: []string{dispatcher.InvoicePaid}, Limit: 2, Scan: 10}
	for {
		pages++
		if pages > 20 {
			t.Fatalf("paging did not end: %d pages, found %v", pages, got)
		}
		page, err := b.Events.Events(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Events {
			got = append(got, ev.ID)
		}
		if !page.HasMore {
			break
		}
		if page.Next == "" || page.Next == q.Cursor {
			t.Fatalf("page %d has more but continues from %q (was %q)", pages, page.Next, q.Cursor)
		}
		q.Cursor = page.Next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("found %v, want %v", got, want)
	}
	// 47 events looked at ten at a time: at least five pages, so no page
	// read the whole history.
	if pages < 5 {
		t.Fatalf("%d pages: a page read more than its bound", pages)
	}
}
