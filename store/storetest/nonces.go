package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Nonces remember the nonces of the requests one instance forwarded to
// another, for as long as one may be taken (cluster.Nonces).
type Nonces interface {
	ClaimNonce(ctx context.Context, nonce string, ttl time.Duration) (bool, error)
}

// ForwardNonces checks Nonces. open returns an empty store and a second
// handle on the same state (another instance).
func ForwardNonces(t *testing.T, open func(t *testing.T) (nonces, other Nonces)) {
	ctx := context.Background()
	t.Run("a nonce is taken once, by one instance", func(t *testing.T) {
		n, other := open(t)
		for i, h := range []Nonces{n, other, n} {
			ok, err := h.ClaimNonce(ctx, "n1", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (i == 0) {
				t.Fatalf("claim %d of one nonce: %v", i, ok)
			}
		}
	})
	claims(t, func(t *testing.T) (claimFunc, claimFunc) {
		n, other := open(t)
		return n.ClaimNonce, other.ClaimNonce
	})
}

// claimFunc takes a key until ttl passes, reporting false if it is taken.
type claimFunc func(ctx context.Context, key string, ttl time.Duration) (bool, error)

// claims checks what every single-use claim keeps: it passes with its
// ttl, and of many claiming at once on two handles, one wins.
func claims(t *testing.T, open func(t *testing.T) (claim, other claimFunc)) {
	ctx := context.Background()
	take := func(t *testing.T, c claimFunc, key string, ttl time.Duration) bool {
		t.Helper()
		ok, err := c(ctx, key, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	t.Run("a claim passes with its ttl", func(t *testing.T) {
		l, other := open(t)
		if !take(t, l, "k", 200*time.Millisecond) {
			t.Fatal("a fresh key is taken")
		}
		deadline := time.Now().Add(10 * time.Second)
		for !take(t, other, "k", time.Hour) {
			if time.Now().After(deadline) {
				t.Fatal("a claim of 200ms still holds after 10s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("of many claiming one key at once, one wins", func(t *testing.T) {
		l, other := open(t)
		for round := range 20 {
			key := fmt.Sprintf("race-%d", round)
			var wg sync.WaitGroup
			won := make(chan bool, 16)
			for i := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					h := l
					if i%2 == 1 {
						h = other
					}
					ok, err := h(ctx, key, time.Hour)
					if err != nil {
						t.Error(err)
					}
					won <- ok
				}()
			}
			wg.Wait()
			close(won)
			n := 0
			for ok := range won {
				if ok {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("round %d: %d claims of one key won", round, n)
			}
		}
	})
}
