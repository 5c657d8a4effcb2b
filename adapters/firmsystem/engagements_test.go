package firmsystem_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/practice"
)

// A firm's engagements come from the first of its systems that keeps
// proposals, or the one it names; a firm whose systems keep none has
// none.
func TestEngagementsRole(t *testing.T) {
	for _, c := range []struct {
		named string
		keeps map[string]bool
		want  string // "" for an error
	}{
		{"", map[string]bool{"records": true, "ledger": true}, "records"}, // XPM records beside a Xero ledger
		{"", map[string]bool{"ledger": true}, "ledger"},                   // Karbon records, Xero ledger
		{"", nil, "none"}, // Karbon alone
		{"", map[string]bool{"records": false, "ledger": false}, "none"}, // Karbon records, Karbon's billing
		{"ledger", map[string]bool{"records": true, "ledger": true}, "ledger"},
		{"none", map[string]bool{"records": true}, "none"},
		{"records", map[string]bool{"ledger": true}, ""},
		{"ledger", nil, ""},
		{"documents", map[string]bool{"records": true}, ""},
	} {
		got, err := firmsystem.EngagementsRole(c.named, c.keeps)
		if got != c.want || (err != nil) != (c.want == "") {
			t.Errorf("EngagementsRole(%q, %v) = %q, %v; want %q", c.named, c.keeps, got, err, c.want)
		}
	}
}

// Each kind has at most one role in every firm, whichever keeps its
// engagements, every kind but engagements exactly one; engagements are
// owned by the role that keeps them and by none where none does, and a
// firm with engagements from its records has the kinds it always had.
func TestKindsOf(t *testing.T) {
	roles := []string{"records", "ledger", "documents"}
	for _, from := range []string{"records", "ledger", "none"} {
		owner := map[practice.Kind]string{}
		for _, role := range roles {
			for _, k := range firmsystem.KindsOf(role, from) {
				if o, ok := owner[k]; ok {
					t.Errorf("engagements from %s: %s owned by %s and %s", from, k, o, role)
				}
				owner[k] = role
			}
		}
		for _, k := range practice.Kinds {
			if _, ok := owner[k]; !ok && k != practice.Engagements {
				t.Errorf("engagements from %s: %s owned by no role", from, k)
			}
		}
		want := map[string]string{"records": "records", "ledger": "ledger", "none": ""}[from]
		if owner[practice.Engagements] != want {
			t.Errorf("engagements from %s are the %q system's", from, owner[practice.Engagements])
		}
	}
	for _, role := range roles {
		if got := firmsystem.KindsOf(role, "records"); !slices.Equal(got, firmsystem.Kinds(role)) {
			t.Errorf("%s: %v, want as before %v", role, got, firmsystem.Kinds(role))
		}
	}
}

type quotesAndClients struct{}

func (quotesAndClients) List(_ context.Context, _ practice.Tenant, k practice.Kind, _ practice.Query) (practice.Page, error) {
	return practice.Page{Items: []json.RawMessage{json.RawMessage(`{"id":"` + k.IDPrefix() + `1"}`)}}, nil
}

func (quotesAndClients) Get(_ context.Context, _ practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	return json.RawMessage(`{"id":"` + id + `"}`), nil
}

// freshClients is a copy whose clients were confirmed at a time.
type freshClients struct{ quotesAndClients }

func (freshClients) Freshness(k practice.Kind) (practice.Freshness, bool) {
	if k != practice.Clients {
		return practice.Freshness{}, false
	}
	return practice.Freshness{State: "live", ConfirmedAt: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}, true
}

func TestNoEngagements(t *testing.T) {
	r := firmsystem.NoEngagements{Reader: freshClients{}}
	ctx := context.Background()
	if p, err := r.List(ctx, practice.Tenant{}, practice.Engagements, practice.Query{}); err != nil || p.Items == nil || len(p.Items) != 0 {
		t.Errorf("engagements listed: %v %v", p.Items, err)
	}
	if _, err := r.Get(ctx, practice.Tenant{}, practice.Engagements, "eng_1"); !errors.Is(err, practice.ErrNotFound) {
		t.Errorf("an engagement read: %v", err)
	}
	if p, err := r.List(ctx, practice.Tenant{}, practice.Clients, practice.Query{}); err != nil || len(p.Items) != 1 ||
		!strings.Contains(string(p.Items[0]), "cli_1") {
		t.Errorf("clients: %v %v", p.Items, err)
	}
	// As fresh as the records that say there are none.
	if f, ok := r.Freshness(practice.Engagements); !ok || f.State != "live" || f.ConfirmedAt.IsZero() {
		t.Errorf("engagements' freshness: %+v %v, want the clients'", f, ok)
	}
	if _, ok := (firmsystem.NoEngagements{Reader: quotesAndClients{}}).Freshness(practice.Engagements); ok {
		t.Error("a reader that says no freshness (the demo records) has some")
	}
}
