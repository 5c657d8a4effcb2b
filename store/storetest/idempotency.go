package storetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/practicegw/practicegw/store/idempotency"
)

// IdempotencyStore is how the API remembers writes sent with an
// Idempotency-Key.
type IdempotencyStore interface {
	Begin(ctx context.Context, key, fingerprint string) (*idempotency.Record, error)
	Finish(ctx context.Context, key string, rec idempotency.Record) error
	Abandon(ctx context.Context, key string) error
}

// Idempotency checks an IdempotencyStore. open returns an empty store and
// a second handle on the same state, both keeping an unanswered key
// reserved for inFlight.
func Idempotency(t *testing.T, openIn func(t *testing.T, inFlight time.Duration) (store, reopen IdempotencyStore)) {
	ctx := context.Background()
	open := func(t *testing.T) (IdempotencyStore, IdempotencyStore) { return openIn(t, idempotency.InFlight) }

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

	t.Run("a reservation whose request died is released, an answer is not", func(t *testing.T) {
		const inFlight = 150 * time.Millisecond
		st, other := openIn(t, inFlight)
		// Measured from before the reservation: the store cannot have
		// reserved earlier, so a release seen before inFlight from here is
		// early whatever the machine's load.
		reserved := time.Now()
		if _, err := st.Begin(ctx, "crd_a:died", "fp"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Begin(ctx, "crd_a:answered", "fp"); err != nil {
			t.Fatal(err)
		}
		if err := st.Finish(ctx, "crd_a:answered", idempotency.Record{Fingerprint: "fp", Status: 201, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if prior, err := other.Begin(ctx, "crd_a:died", "fp"); err != nil || prior == nil || prior.Done() {
			t.Fatalf("at once: %+v, %v; want the reservation in progress", prior, err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			prior, err := other.Begin(ctx, "crd_a:died", "fp")
			if err != nil {
				t.Fatal(err)
			}
			if prior == nil {
				break // released: this Begin reserved it afresh
			}
			if time.Now().After(deadline) {
				t.Fatal("a reservation whose request never answered was never released")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if held := time.Since(reserved); held < inFlight-20*time.Millisecond {
			t.Fatalf("released after %s, before its %s", held, inFlight)
		}
		if prior, err := other.Begin(ctx, "crd_a:answered", "fp"); err != nil || prior == nil || prior.Status != 201 {
			t.Fatalf("the answered key after the in-flight time: %+v, %v; want its answer", prior, err)
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

// IdempotencySealed checks that a backend keeps a remembered answer
// sealed: an answer may hold what is given once (a webhook endpoint's
// secret), which a copy of the store must not give away. raw is every key
// and value the backend holds.
func IdempotencySealed(t *testing.T, st, other IdempotencyStore, raw func() []byte) {
	ctx := context.Background()
	const secret = "whsec_c2VjcmV0LWdpdmVuLW9uY2UtaW4tdGhlLWFuc3dlcg"
	if _, err := st.Begin(ctx, "crd_a:sealed", "fp"); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"we_1","secret":"` + secret + `"}`)
	if err := st.Finish(ctx, "crd_a:sealed", idempotency.Record{Fingerprint: "fp", Status: 201, Body: body}); err != nil {
		t.Fatal(err)
	}
	// In plain text, or merely encoded as JSON encodes bytes.
	held := raw()
	for _, plain := range []string{secret, base64.StdEncoding.EncodeToString(body)} {
		if len(held) == 0 || bytes.Contains(held, []byte(plain)) {
			t.Fatalf("the backend holds the answer unsealed (%d bytes)", len(held))
		}
	}
	prior, err := other.Begin(ctx, "crd_a:sealed", "fp")
	if err != nil || prior == nil || !bytes.Equal(prior.Body, body) || prior.Status != 201 {
		t.Fatalf("replay: %+v, %v", prior, err)
	}
}
