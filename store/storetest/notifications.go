package storetest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/notifications"
)

// NotificationInbox keeps vendor notifications until what they name is
// read (adapters/kit/notifications.Inbox).
type NotificationInbox = notifications.Inbox

// Notifications checks a NotificationInbox. open returns an empty inbox
// and a second handle on the same state (another instance).
func Notifications(t *testing.T, open func(t *testing.T) (inbox, other NotificationInbox)) {
	ctx := context.Background()
	keep := func(t *testing.T, in NotificationInbox, scope, key string, items ...string) bool {
		t.Helper()
		var bs [][]byte
		for _, it := range items {
			bs = append(bs, []byte(it))
		}
		ok, err := in.KeepNotification(ctx, scope, key, bs)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	take := func(t *testing.T, in NotificationInbox, scope string, n int, lease time.Duration) []notifications.Kept {
		t.Helper()
		got, err := in.TakeNotifications(ctx, scope, n, lease)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	items := func(ks []notifications.Kept) string {
		var out []string
		for _, k := range ks {
			out = append(out, string(k.Item))
		}
		return fmt.Sprint(out)
	}

	t.Run("a body is kept once within the window", func(t *testing.T) {
		in, other := open(t)
		if !keep(t, in, "karbon/frm_acme", "d1", "W1", "W2") {
			t.Fatal("a fresh body is not kept")
		}
		if keep(t, other, "karbon/frm_acme", "d1", "W1") || keep(t, in, "karbon/frm_acme", "d1") {
			t.Fatal("a body kept is kept again")
		}
		if !keep(t, other, "karbon/frm_birch", "d1", "W9") {
			t.Fatal("the same body of another firm is not kept")
		}
		if got := items(take(t, other, "karbon/frm_acme", 10, time.Hour)); got != "[W1 W2]" {
			t.Fatalf("took %s, want the items in the order kept", got)
		}
		if got := items(take(t, in, "karbon/frm_birch", 10, time.Hour)); got != "[W9]" {
			t.Fatalf("another scope's items: %s", got)
		}
	})

	t.Run("an item is taken once until its lease passes or it is settled", func(t *testing.T) {
		in, other := open(t)
		keep(t, in, "s", "a", "1", "2", "3")
		keep(t, in, "s", "b", "4")
		first := take(t, in, "s", 2, time.Hour)
		if items(first) != "[1 2]" || first[0].ID == first[1].ID || first[0].At.IsZero() {
			t.Fatalf("first take %+v", first)
		}
		if got := items(take(t, other, "s", 10, time.Hour)); got != "[3 4]" {
			t.Fatalf("another instance took %s, want the rest", got)
		}
		if got := take(t, in, "s", 10, time.Hour); len(got) != 0 {
			t.Fatalf("items taken twice within their lease: %s", items(got))
		}
		if err := other.SettleNotification(ctx, "s", first[0].ID, true, 0); err != nil {
			t.Fatal(err)
		}
		if err := in.SettleNotification(ctx, "s", first[1].ID, false, 0); err != nil {
			t.Fatal(err)
		}
		if got := items(take(t, other, "s", 10, time.Hour)); got != "[2]" {
			t.Fatalf("after settling 1 done and 2 failed: took %s, want 2 again", got)
		}
		if err := in.SettleNotification(ctx, "s", "never-kept", true, 0); err != nil {
			t.Fatalf("settling an item never kept: %v", err)
		}

		keep(t, in, "lease", "c", "5")
		if got := items(take(t, in, "lease", 1, 200*time.Millisecond)); got != "[5]" {
			t.Fatalf("took %s", got)
		}
		deadline := time.Now().Add(10 * time.Second)
		for len(take(t, other, "lease", 1, time.Hour)) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("an item leased for 200ms is not due again after 10s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		keep(t, in, "retry", "d", "6")
		k := take(t, in, "retry", 1, time.Hour)
		if err := in.SettleNotification(ctx, "retry", k[0].ID, false, time.Hour); err != nil {
			t.Fatal(err)
		}
		if got := take(t, other, "retry", 1, time.Hour); len(got) != 0 {
			t.Fatal("an item to retry in an hour is due at once")
		}
	})

	t.Run("of many taking at once, each item goes to one", func(t *testing.T) {
		in, other := open(t)
		const n = 60
		for i := range n {
			keep(t, in, "race", fmt.Sprint("body", i), fmt.Sprint(i))
		}
		var (
			mu   sync.Mutex
			got  []string
			wg   sync.WaitGroup
			errs = make(chan error, 16)
		)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := in
				if g%2 == 1 {
					h = other
				}
				for {
					ks, err := h.TakeNotifications(ctx, "race", 3, time.Hour)
					if err != nil {
						errs <- err
						return
					}
					if len(ks) == 0 {
						return
					}
					mu.Lock()
					for _, k := range ks {
						got = append(got, string(k.Item))
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		sort.Strings(got)
		if len(got) != n {
			t.Fatalf("%d items taken of %d: %v", len(got), n, got)
		}
		for i := 1; i < len(got); i++ {
			if got[i] == got[i-1] {
				t.Fatalf("item %s taken twice", got[i])
			}
		}
	})
}
