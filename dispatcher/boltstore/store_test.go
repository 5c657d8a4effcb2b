package boltstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/dispatcher/boltstore"
	bolt "go.etcd.io/bbolt"
)

var t0 = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

func open(t *testing.T) (*boltstore.Store, *bolt.DB) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "shared.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// Someone else's bucket in the shared file.
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("records"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := boltstore.New(db); err != nil {
		t.Fatalf("opening twice: %v", err)
	}
	return st, db
}

func endpoint(t *testing.T, st *boltstore.Store, id string) dispatcher.Endpoint {
	t.Helper()
	ep := dispatcher.Endpoint{ID: id, Firm: "frm_acme", URL: "https://example.com/" + id, Events: []string{"*"},
		Status: dispatcher.EndpointEnabled, Secrets: []dispatcher.Secret{{Key: "whsec_AAAA"}}, CreatedAt: t0}
	if err := st.CreateEndpoint(context.Background(), ep); err != nil {
		t.Fatal(err)
	}
	return ep
}

func delivery(id, endpointID string, due time.Time) dispatcher.Delivery {
	return dispatcher.Delivery{ID: id, EventID: "evt_" + id, Event: dispatcher.ClientCreated, EndpointID: endpointID,
		Firm: "frm_acme", State: dispatcher.StatePending, Attempts: []dispatcher.Attempt{},
		NextAttemptAt: due, CreatedAt: due, UpdatedAt: due}
}

func claimAll(t *testing.T, st *boltstore.Store, now time.Time) ([]string, []dispatcher.Lease, time.Time) {
	t.Helper()
	claims, next, err := st.Claim(context.Background(), dispatcher.ClaimRequest{
		Now: now, LeaseUntil: now.Add(time.Minute), Max: 100, Accept: func(string) bool { return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	var leases []dispatcher.Lease
	for _, c := range claims {
		ids = append(ids, c.Delivery.ID)
		leases = append(leases, c.Lease)
	}
	return ids, leases, next
}

func TestClaimLeaseAndExpiry(t *testing.T) {
	st, db := open(t)
	ctx := context.Background()
	endpoint(t, st, "we_a")
	endpoint(t, st, "we_b")
	n, err := st.Enqueue(ctx, []dispatcher.Delivery{
		delivery("dlv_2", "we_a", t0.Add(2*time.Second)),
		delivery("dlv_1", "we_b", t0.Add(time.Second)),
		delivery("dlv_3", "we_a", t0.Add(time.Hour)),
		delivery("dlv_x", "we_gone", t0),
	})
	if err != nil || n != 3 {
		t.Fatalf("Enqueue = %d, %v; want 3 (one endpoint does not exist)", n, err)
	}
	if n, _ := st.Enqueue(ctx, []dispatcher.Delivery{delivery("dlv_1", "we_b", t0)}); n != 0 {
		t.Fatalf("re-enqueueing created %d", n)
	}

	if ids, _, next := claimAll(t, st, t0); len(ids) != 0 || !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("nothing due yet: claimed %v, next %s", ids, next)
	}
	// Accept sees endpoint ids in due order and decides.
	var asked []string
	claims, next, err := st.Claim(ctx, dispatcher.ClaimRequest{Now: t0.Add(time.Minute), LeaseUntil: t0.Add(2 * time.Minute), Max: 10,
		Accept: func(ep string) bool { asked = append(asked, ep); return ep == "we_a" }})
	if err != nil || len(claims) != 1 || claims[0].Delivery.ID != "dlv_2" {
		t.Fatalf("Claim = %v, %v", claims, err)
	}
	if !slices.Equal(asked, []string{"we_b", "we_a"}) {
		t.Errorf("Accept asked about %v", asked)
	}
	if !next.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("next = %s, want the lease expiry", next)
	}
	// Leased: not claimable until the lease runs out, then claimable again.
	ids, leases, _ := claimAll(t, st, t0.Add(90*time.Second))
	if !slices.Equal(ids, []string{"dlv_1"}) {
		t.Fatalf("claimed %v, want only dlv_1", ids)
	}
	if _, err := st.RecordAttempt(ctx, leases[0], dispatcher.Outcome{State: dispatcher.StateDelivered, At: t0}); err != nil {
		t.Fatal(err)
	}
	ids, leases, _ = claimAll(t, st, t0.Add(2*time.Minute))
	if !slices.Equal(ids, []string{"dlv_2"}) || leases[0].Token == claims[0].Lease.Token {
		t.Fatalf("after expiry claimed %v with token %v", ids, leases)
	}
	if _, err := st.RecordAttempt(ctx, claims[0].Lease, dispatcher.Outcome{State: dispatcher.StateDelivered, At: t0}); !errors.Is(err, dispatcher.ErrLeaseLost) {
		t.Fatalf("record with the expired lease: %v", err)
	}
	if _, err := st.Lease(ctx, "dlv_2", t0.Add(2*time.Minute), t0.Add(3*time.Minute)); !errors.Is(err, dispatcher.ErrBusy) {
		t.Fatalf("Lease while leased: %v", err)
	}

	// Retrying: the due index moves to the next attempt.
	a := dispatcher.Attempt{Number: 1, Trigger: dispatcher.TriggerScheduled, StartedAt: t0, ResponseCode: 500, Error: "x"}
	d, err := st.RecordAttempt(ctx, leases[0], dispatcher.Outcome{Attempt: &a, State: dispatcher.StateRetrying,
		NextAttemptAt: t0.Add(10 * time.Minute), At: t0.Add(2 * time.Minute)})
	if err != nil || d.State != dispatcher.StateRetrying || len(d.Attempts) != 1 {
		t.Fatalf("RecordAttempt = %+v, %v", d, err)
	}
	if ids, _, _ := claimAll(t, st, t0.Add(9*time.Minute)); len(ids) != 0 {
		t.Fatalf("claimed %v before the retry was due", ids)
	}
	ids, leases, _ = claimAll(t, st, t0.Add(10*time.Minute))
	if !slices.Equal(ids, []string{"dlv_2"}) {
		t.Fatalf("claimed %v at the retry", ids)
	}
	// Released with notBefore: pushed back, no attempt spent.
	if err := st.Release(ctx, leases, t0.Add(20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if d, _ := st.Delivery(ctx, "dlv_2"); !d.NextAttemptAt.Equal(t0.Add(20*time.Minute)) || len(d.Attempts) != 1 {
		t.Fatalf("after release: next %s, %d attempts", d.NextAttemptAt, len(d.Attempts))
	}
	// Final states leave the due index.
	ids, leases, _ = claimAll(t, st, t0.Add(20*time.Minute))
	if _, err := st.RecordAttempt(ctx, leases[0], dispatcher.Outcome{Attempt: &a, State: dispatcher.StateFailed, At: t0}); err != nil {
		t.Fatal(err)
	}
	ids, leases, _ = claimAll(t, st, t0.Add(1000*time.Hour))
	if !slices.Equal(ids, []string{"dlv_3"}) {
		t.Fatalf("claimed %v, want the last active delivery", ids)
	}
	if _, err := st.RecordAttempt(ctx, leases[0], dispatcher.Outcome{Attempt: &a, State: dispatcher.StateDelivered, At: t0}); err != nil {
		t.Fatal(err)
	}
	if ids, _, next := claimAll(t, st, t0.Add(2000*time.Hour)); len(ids) != 0 || !next.IsZero() {
		t.Fatalf("claimed %v (next %s) with nothing active", ids, next)
	}
	dueKeys := 0
	db.View(func(tx *bolt.Tx) error {
		dueKeys = tx.Bucket([]byte("dispatch_due")).Stats().KeyN
		return nil
	})
	if dueKeys != 0 {
		t.Fatalf("%d stale entries in dispatch_due", dueKeys)
	}

	// A failed delivery can be queued for one replay, once.
	n, err = st.RequeueFailed(ctx, "we_a", t0, t0.Add(30*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("RequeueFailed = %d, %v", n, err)
	}
	if n, _ := st.RequeueFailed(ctx, "we_a", t0, t0.Add(30*time.Hour)); n != 0 {
		t.Fatalf("requeued twice")
	}
	claims, _, _ = st.Claim(ctx, dispatcher.ClaimRequest{Now: t0.Add(30 * time.Hour), LeaseUntil: t0.Add(31 * time.Hour), Max: 10,
		Accept: func(string) bool { return true }})
	if len(claims) != 1 || !claims[0].Replay {
		t.Fatalf("replay claim %+v", claims)
	}
}

func TestClaimStopsAtMax(t *testing.T) {
	st, _ := open(t)
	endpoint(t, st, "we_a")
	var ds []dispatcher.Delivery
	for i := range 5 {
		ds = append(ds, delivery(fmt.Sprintf("dlv_%d", i), "we_a", t0))
	}
	st.Enqueue(context.Background(), ds)
	claims, next, err := st.Claim(context.Background(), dispatcher.ClaimRequest{Now: t0, LeaseUntil: t0.Add(time.Minute), Max: 2,
		Accept: func(string) bool { return true }})
	if err != nil || len(claims) != 2 || !next.Equal(t0) {
		t.Fatalf("Claim = %d claims, next %s, %v; want 2 and next = now", len(claims), next, err)
	}
}

func TestDeleteEndpointTakesItsDeliveries(t *testing.T) {
	st, db := open(t)
	ctx := context.Background()
	endpoint(t, st, "we_a")
	endpoint(t, st, "we_b")
	st.Enqueue(ctx, []dispatcher.Delivery{delivery("dlv_a", "we_a", t0), delivery("dlv_b", "we_b", t0)})
	if err := st.DeleteEndpoint(ctx, "we_a"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteEndpoint(ctx, "we_a"); !errors.Is(err, dispatcher.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := st.Delivery(ctx, "dlv_a"); !errors.Is(err, dispatcher.ErrNotFound) {
		t.Fatalf("delivery of a deleted endpoint: %v", err)
	}
	if ids, _, _ := claimAll(t, st, t0); !slices.Equal(ids, []string{"dlv_b"}) {
		t.Fatalf("claimed %v", ids)
	}
	eps, _ := st.Endpoints(ctx, adapters.Tenant{Firm: "frm_acme"})
	if len(eps) != 1 || eps[0].ID != "we_b" || len(eps[0].Secrets) != 1 {
		t.Fatalf("endpoints %+v", eps)
	}
	db.View(func(tx *bolt.Tx) error {
		if string(tx.Bucket([]byte("records")).Get([]byte("k"))) != "v" {
			t.Error("a foreign bucket was disturbed")
		}
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			if string(name) != "records" && !strings.HasPrefix(string(name), "dispatch_") {
				t.Errorf("bucket %q lacks the dispatch_ prefix", name)
			}
			return nil
		})
	})
}

func TestEventsAreRecordedOnce(t *testing.T) {
	st, _ := open(t)
	ctx := context.Background()
	ev := dispatcher.Event{ID: dispatcher.EventID("chg_1", dispatcher.ClientCreated, t0), Event: dispatcher.ClientCreated,
		OccurredAt: t0, Firm: "frm_acme", Data: json.RawMessage(`{"client_id":"cli_1","name":"A & B"}`), ResourceID: "cli_1"}
	for i, want := range []bool{true, false} {
		created, err := st.Record(ctx, ev)
		if err != nil || created != want {
			t.Fatalf("Record #%d = %v, %v", i+1, created, err)
		}
	}
	got, err := st.Event(ctx, ev.ID)
	if err != nil || got.ResourceID != "cli_1" || string(got.Data) != string(ev.Data) || !got.OccurredAt.Equal(t0) {
		t.Fatalf("Event = %+v, %v", got, err)
	}
	if _, err := st.Event(ctx, "evt_missing"); !errors.Is(err, dispatcher.ErrNotFound) {
		t.Fatalf("missing event: %v", err)
	}
}
