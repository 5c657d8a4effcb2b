package storetest

import (
	"context"
	"testing"

	"github.com/practicegw/practicegw/internal/idempotency"
)

// IdempotencyStore is how the API remembers writes sent with an
// Idempotency-Key.
type IdempotencyStore interface {
	Begin(ctx context.Context, key, fingerprint string) (*idempotency.Record, error)
	Finish(ctx context.Context, key string, rec idempotency.Record) error
	Abandon(ctx context.Context, key string) error
}

// Idempotency checks an IdempotencyStore. open returns an empty store and
// a second handle on the same state.
func Idempotency(t *testing.T, open func(t *testing.T) (store, reopen IdempotencyStore)) {
	ctx := context.Background()

	t.Run("first begin reserves, later ones see the reservation", func(t *testing.T) {
		st, other := open(t)
		prior, err := st.Begin(ctx, "crd_a:key1", "fp1")
		if err != nil || prior != nil {
			t.Fatalf("first Begin: %+v, %v; want a reservation", prior, err)
		}
		prior, err = other.Begin(ctx, "crd_a:key1", "fp2")
		if err != nil || prior == nil {
			t.Fatalf("second Begin: %+v, %v; want the first one's record", prior, err)
		}
		if prior.Done() || prior.Fingerprint != "fp1" {
			t.Fatalf("in-flight record %+v, want fingerprint fp1 and not done", prior)
		}
	})

	t.Run("a finished key replays its answer", func(t *testing.T) {
		st, other := open(t)
		if _, err := st.Begin(ctx, "crd_a:key2", "fp"); err != nil {
			t.Fatal(err)
		}
		rec := idempotency.Record{Fingerprint: "fp", Status: 201, Body: []byte(`{"id":"cli_1"}`)}
		if err := st.Finish(ctx, "crd_a:key2", rec); err != nil {
			t.Fatal(err)
		}
		prior, err := other.Begin(ctx, "crd_a:key2", "fp")
		if err != nil || prior == nil || !prior.Done() || prior.Status != 201 || string(prior.Body) != `{"id":"cli_1"}` {
			t.Fatalf("replay: %+v, %v", prior, err)
		}
	})

	t.Run("an abandoned key can be used again", func(t *testing.T) {
		st, other := open(t)
		if _, err := st.Begin(ctx, "crd_a:key3", "fp"); err != nil {
			t.Fatal(err)
		}
		if err := st.Abandon(ctx, "crd_a:key3"); err != nil {
			t.Fatal(err)
		}
		prior, err := other.Begin(ctx, "crd_a:key3", "fp")
		if err != nil || prior != nil {
			t.Fatalf("after Abandon: %+v, %v; want a fresh reservation", prior, err)
		}
	})

	t.Run("finishing a key that is no longer reserved does not bring it back", func(t *testing.T) {
		st, other := open(t)
		if _, err := st.Begin(ctx, "crd_a:key4", "fp"); err != nil {
			t.Fatal(err)
		}
		if err := st.Abandon(ctx, "crd_a:key4"); err != nil {
			t.Fatal(err)
		}
		if err := st.Finish(ctx, "crd_a:key4", idempotency.Record{Fingerprint: "fp", Status: 200}); err != nil {
			t.Fatal(err)
		}
		if prior, err := other.Begin(ctx, "crd_a:key4", "fp"); err != nil || prior != nil {
			t.Fatalf("after Finish on a released key: %+v, %v; want a fresh reservation", prior, err)
		}
	})

	t.Run("keys are separate", func(t *testing.T) {
		st, _ := open(t)
		for _, k := range []string{"crd_a:k", "crd_b:k"} {
			if prior, err := st.Begin(ctx, k, "fp"); err != nil || prior != nil {
				t.Fatalf("Begin(%s): %+v, %v", k, prior, err)
			}
		}
	})
}
