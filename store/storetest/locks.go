package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

// Locks checks the leases the OAuth2 token source refreshes under
// (upstream.Locks): a and b are two handles on one store, as two gateway
// instances hold them. Many holders contend through both handles and at
// most one is ever inside; a holder that never releases (it died) blocks
// the others until its ttl ends and no longer.
func Locks(t *testing.T, open func(t *testing.T) (a, b upstream.Locks)) {
	a, b := open(t)
	const name = "oauth2/xero/app/refresh"

	var inside, entered, maxInside atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		l := []upstream.Locks{a, b}[i%2]
		holder := fmt.Sprintf("inst-%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				deadline := time.Now().Add(10 * time.Second)
				for {
					ok, err := l.Lease(ctx, name, holder, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("%s never got the lease", holder)
						return
					}
					time.Sleep(time.Millisecond)
				}
				n := inside.Add(1)
				for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
				}
				entered.Add(1)
				inside.Add(-1)
				if err := l.Release(ctx, name, holder); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if m := maxInside.Load(); m != 1 {
		t.Fatalf("%d holders were inside the lease at once", m)
	}
	if n := entered.Load(); n != 16*5 {
		t.Fatalf("%d of %d leases taken", n, 16*5)
	}

	// A holder that dies mid-refresh: another's release does not free
	// its lease, which expires after its ttl.
	const ttl = 300 * time.Millisecond
	taken := time.Now()
	if ok, err := a.Lease(ctx, name, "dead", ttl); err != nil || !ok {
		t.Fatalf("dead's lease: %t, %v", ok, err)
	}
	if err := b.Release(ctx, name, "alive"); err != nil {
		t.Fatal(err)
	}
	for {
		ok, err := b.Lease(ctx, name, "alive", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Since(taken) > 10*time.Second {
			t.Fatalf("a lease of %v was still held after 10s", ttl)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Stores keep whole milliseconds, on a clock that may be a
	// millisecond behind this one.
	if held := time.Since(taken); held < ttl-5*time.Millisecond {
		t.Fatalf("a dead holder's lease of %v was taken after %v", ttl, held)
	}
	if ok, err := a.Lease(ctx, name, "dead", time.Minute); err != nil || ok {
		t.Fatalf("the dead holder took back a lease another holds: %t, %v", ok, err)
	}
}
