package karbon_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

type stamped struct {
	Title     string    `json:"title"`
	Stage     string    `json:"stage"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	UpdatedAt time.Time `json:"updated_at"`
	Version   int64     `json:"version"`
}

func readStamped(t *testing.T, a *karbon.Adapter, k practice.Kind, id string) stamped {
	t.Helper()
	raw, err := a.Get(context.Background(), live, k, id)
	if err != nil {
		t.Fatal(err)
	}
	var s stamped
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s.Version != s.UpdatedAt.UnixMilli() {
		t.Fatalf("%s: version %d is not updated_at %v in milliseconds", id, s.Version, s.UpdatedAt)
	}
	return s
}

// Karbon publishes no modification time on a work item: a stage moved
// through /v1 and a title changed in Karbon each raise the job's version
// and updated_at to when the gateway first read the change, every
// instance sharing the state store answers the same, and a job read
// again unchanged keeps them. updated_since finds the changed job.
func TestAWorkItemsChangesMoveItsVersion(t *testing.T) {
	k := fixture(t)
	state := changes.NewMemoryState()
	shared := func(_ *karbonConfig, d *upstream.Deps) { d.State = state }
	a, clock := newAdapter(t, k, shared)
	ctx := context.Background()
	clock.Advance(100 * time.Hour)                       // past every work item's dates
	pageAll(t, a, practice.Jobs, practice.Filter{}, 100) // every job stamped when first seen
	first := readStamped(t, a, practice.Jobs, "job_W0001")

	clock.Advance(time.Minute)
	if again := readStamped(t, a, practice.Jobs, "job_W0001"); again != first {
		t.Fatalf("read again unchanged: %+v, want %+v", again, first)
	}
	clock.Advance(time.Minute)
	movedAt := clock.Now()
	raw, err := a.MoveJob(ctx, live, "job_W0001", practice.StageMove{Stage: "in_review"})
	if err != nil {
		t.Fatal(err)
	}
	var answer stamped
	_ = json.Unmarshal(raw, &answer)
	after := readStamped(t, a, practice.Jobs, "job_W0001")
	if answer != after || after.Stage != "in_review" || after.Version <= first.Version || after.UpdatedAt.Before(movedAt) {
		t.Fatalf("after a stage move: answered %+v, read %+v; before %+v", answer, after, first)
	}

	// Another instance, and this one restarted, answer the same.
	other, _ := newAdapter(t, k, shared, func(_ *karbonConfig, d *upstream.Deps) { d.Clock = clock })
	if got := readStamped(t, other, practice.Jobs, "job_W0001"); got != after {
		t.Fatalf("another instance: %+v, want %+v", got, after)
	}

	clock.Advance(time.Minute)
	titledAt := clock.Now()
	w, _ := k.WorkItem("W0001")
	w.Title = "Accounts 1 (revised)"
	k.AddWorkItem(w)
	titled := readStamped(t, other, practice.Jobs, "job_W0001")
	if titled.Title != w.Title || titled.Version <= after.Version || titled.UpdatedAt.Before(titledAt) {
		t.Fatalf("after a title change in Karbon: %+v; before %+v", titled, after)
	}
	if got := readStamped(t, a, practice.Jobs, "job_W0001"); got != titled {
		t.Fatalf("the first instance after the title change: %+v, want %+v", got, titled)
	}

	// Changed back, it is a change too.
	clock.Advance(time.Minute)
	w.Title = "Accounts 1"
	k.AddWorkItem(w)
	if back := readStamped(t, a, practice.Jobs, "job_W0001"); back.Version <= titled.Version {
		t.Fatalf("changed back: version %d after %d", back.Version, titled.Version)
	}

	page, err := a.List(ctx, live, practice.Jobs, practice.Query{Limit: 100, Filter: practice.Filter{UpdatedSince: titledAt}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, raw := range page.Items {
		var v struct{ ID string }
		_ = json.Unmarshal(raw, &v)
		ids = append(ids, v.ID)
	}
	if len(ids) != 1 || ids[0] != "job_W0001" {
		t.Fatalf("updated_since the title change: %v, want only job_W0001", ids)
	}
}

// A user's change in Karbon (a new role) raises the person's version and
// updated_at, which a read of an unchanged user keeps.
func TestAUsersChangesMoveItsVersion(t *testing.T) {
	k := fixture(t)
	a, clock := newAdapter(t, k)
	clock.Advance(time.Hour)
	if _, err := a.List(context.Background(), live, practice.People, practice.Query{Limit: 100}); err != nil {
		t.Fatal(err)
	}
	first := readStamped(t, a, practice.People, "usr_U1partner")
	if first.UpdatedAt.IsZero() || first.Version <= 1 {
		t.Fatalf("a user's first read: %+v", first)
	}
	clock.Advance(time.Minute)
	if again := readStamped(t, a, practice.People, "usr_U1partner"); again != first {
		t.Fatalf("read again unchanged: %+v, want %+v", again, first)
	}
	clock.Advance(time.Minute)
	changedAt := clock.Now()
	k.AddUser(vendortest.KarbonUser{Id: "U1partner", Name: "Pat Partner-Jones", EmailAddress: "pat@firm.example", Roles: []string{"Partner"}})
	changed := readStamped(t, a, practice.People, "usr_U1partner")
	if changed.Name != "Pat Partner-Jones" || changed.Version <= first.Version || changed.UpdatedAt.Before(changedAt) {
		t.Fatalf("after a change in Karbon: %+v; before %+v", changed, first)
	}
	page, err := a.List(context.Background(), live, practice.People, practice.Query{Limit: 100, Filter: practice.Filter{UpdatedSince: changedAt}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 {
		t.Fatalf("updated_since the change: %d people, want 1", len(page.Items))
	}
}
