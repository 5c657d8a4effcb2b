package karbon_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
)

// Karbon refusing the access key is told to the gateway once it is
// confirmed by a second call: a 401 followed by an accepted call is a
// glitch and tells nothing; a key Karbon refuses twice tells once, with
// the reason an administrator reads, however many calls it refuses.
func TestKeyRefusalIsConfirmedThenToldOnce(t *testing.T) {
	k := vendortest.StartKarbon(t)
	k.AddContact(vendortest.KarbonContact{ContactKey: "C001", FirstName: "Ann", LastName: "Client", ContactType: "Client"})
	var mu sync.Mutex
	var told []string
	a, _ := newAdapter(t, k, func(_ *karbonConfig, d *upstream.Deps) {
		d.GrantRefused = func(reason string) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, reason)
		}
	})
	list := func() error {
		_, err := a.List(context.Background(), live, practice.Clients, practice.Query{Limit: 10})
		return err
	}
	said := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), told...)
	}
	refused := vendortest.Fault{Status: http.StatusUnauthorized, Body: `{"error":{"code":"401","message":"Unauthorized"}}`}
	k.Faults.Queue(refused)
	_ = list()
	if got := said(); len(got) != 0 {
		t.Fatalf("one refusal followed by an accepted call told %q", got)
	}
	if err := list(); err != nil {
		t.Fatalf("after the glitch: %v", err)
	}
	k.Faults.Down(vendortest.Fault{Status: http.StatusForbidden, Body: `{"error":{"code":"403","message":"Forbidden"}}`})
	for range 3 {
		_ = list()
	}
	if got := said(); len(got) != 1 || got[0] != karbon.KeyRefused {
		t.Fatalf("a key refused on every call told %q, want %q once", got, karbon.KeyRefused)
	}
}
