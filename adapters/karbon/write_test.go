package karbon_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

func ptr[T any](v T) *T { return &v }

func TestClientWrites(t *testing.T) {
	k := fixture(t)
	s := &sink{}
	a, _ := newAdapter(t, k, func(_ *karbonConfig, d *upstream.Deps) { d.Changes = s })
	ctx := context.Background()

	raw, err := a.CreateClient(ctx, live, practice.ClientInput{Name: ptr("Jane Q Public"), Type: ptr("individual"),
		Owner: ptr("usr_U2manager"), Email: ptr("jane@example.com"), Country: ptr("ie")})
	if err != nil {
		t.Fatal(err)
	}
	var c practice.Client
	json.Unmarshal(raw, &c)
	if c.Name != "Jane Q Public" || c.Type != "individual" || c.Status != "active" || practice.ValueOf(c.Owner) != "usr_U2manager" ||
		c.Email != "jane@example.com" || c.Country != "IE" || c.ID[:6] != "cli_c-" {
		t.Fatalf("created %+v", c)
	}

	raw, err = a.CreateClient(ctx, live, practice.ClientInput{Name: ptr("Harbour Joinery LLP"), Type: ptr("partnership"), Status: ptr("prospect")})
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(raw, &c)
	if c.Type != "partnership" || c.Status != "prospect" || c.ID[:6] != "cli_o-" {
		t.Fatalf("created %+v", c)
	}
	raw, err = a.UpdateClient(ctx, live, c.ID, practice.ClientInput{Name: ptr("Harbour Joinery Partners LLP"), Status: ptr("active"),
		Owner: ptr("usr_U1partner"), Phone: ptr("+44 20 7946 0999")})
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(raw, &c)
	if c.Name != "Harbour Joinery Partners LLP" || c.Status != "active" || practice.ValueOf(c.Owner) != "usr_U1partner" || c.Phone != "+44 20 7946 0999" {
		t.Fatalf("updated %+v", c)
	}
	if got := s.all(); len(got) != 3 || got[2].Before == nil || got[2].Kind != practice.Clients {
		t.Fatalf("changes %+v", got)
	}

	for name, tc := range map[string]struct {
		id    string
		in    practice.ClientInput
		param string
	}{
		"one-word person":      {"", practice.ClientInput{Name: ptr("Cher"), Type: ptr("individual")}, "name"},
		"unknown owner":        {"", practice.ClientInput{Name: ptr("A Ltd"), Owner: ptr("usr_ghost")}, "owner"},
		"contacts":             {"", practice.ClientInput{Name: ptr("A Ltd"), Contacts: &[]practice.Contact{{Name: "X", Role: "y"}}}, "contacts"},
		"person to company":    {"cli_c-C001", practice.ClientInput{Type: ptr("company")}, "type"},
		"organization to self": {"cli_o-O001", practice.ClientInput{Type: ptr("individual")}, "type"},
	} {
		var err error
		if tc.id == "" {
			_, err = a.CreateClient(ctx, live, tc.in)
		} else {
			_, err = a.UpdateClient(ctx, live, tc.id, tc.in)
		}
		var inv *practice.InvalidError
		if !errors.As(err, &inv) || inv.Param != tc.param {
			t.Errorf("%s: err = %v, want invalid %s", name, err, tc.param)
		}
	}
}

func TestJobWrites(t *testing.T) {
	k := fixture(t)
	s := &sink{}
	a, _ := newAdapter(t, k, func(_ *karbonConfig, d *upstream.Deps) { d.Changes = s })
	ctx := context.Background()

	raw, err := a.CreateJob(ctx, live, practice.JobInput{Title: ptr("VAT return Q1"), Type: ptr("VAT"), Client: ptr("cli_o-O003"),
		Owner: ptr("usr_U2manager"), Deadline: ptr("2026-05-07")})
	if err != nil {
		t.Fatal(err)
	}
	var j practice.Job
	json.Unmarshal(raw, &j)
	if j.Title != "VAT return Q1" || practice.ValueOf(j.Client) != "cli_o-O003" || practice.ValueOf(j.Owner) != "usr_U2manager" || j.Stage != "planned" ||
		j.Deadline != "2026-05-07" || j.Type != "VAT" {
		t.Fatalf("created %+v", j)
	}
	raw, err = a.UpdateJob(ctx, live, j.ID, practice.JobInput{Title: ptr("VAT return Q1 2026"), Owner: ptr("usr_U1partner")})
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(raw, &j)
	if j.Title != "VAT return Q1 2026" || practice.ValueOf(j.Owner) != "usr_U1partner" {
		t.Fatalf("updated %+v", j)
	}
	raw, err = a.UpdateJob(ctx, live, j.ID, practice.JobInput{Client: ptr("cli_c-C010")})
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(raw, &j)
	if practice.ValueOf(j.Client) != "cli_c-C010" || j.Title != "VAT return Q1 2026" || j.Deadline != "2026-05-07" {
		t.Fatalf("moved to another client: %+v", j)
	}

	raw, err = a.MoveJob(ctx, live, j.ID, practice.StageMove{Stage: "in_review", Note: "Ready for Pat"})
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(raw, &j)
	w, _ := k.WorkItem(j.ID[4:])
	if j.Stage != "in_review" || w.PrimaryStatus != "InProgress" || w.SecondaryStatus != "In Review" {
		t.Fatalf("moved: job %+v, work item %+v", j, w)
	}
	if notes := k.Notes(); len(notes) != 1 || notes[0]["Body"] != "Ready for Pat" {
		t.Fatalf("notes %v", notes)
	}
	changes := s.all()
	last := changes[len(changes)-1]
	if last.Note != "Ready for Pat" || last.Kind != practice.Jobs {
		t.Fatalf("last change %+v", last)
	}
	var before, after practice.Job
	json.Unmarshal(last.Before, &before)
	json.Unmarshal(last.After, &after)
	if before.Stage != "planned" || after.Stage != "in_review" {
		t.Fatalf("change %s -> %s", before.Stage, after.Stage)
	}

	raw, err = a.MoveJob(ctx, live, j.ID, practice.StageMove{Stage: "cancelled"})
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(raw, &j)
	if j.Stage != "cancelled" || j.ClosedAt == nil {
		t.Fatalf("cancelled: %+v", j)
	}

	for name, tc := range map[string]struct {
		err  error
		code string
	}{
		"engagement": {func() error {
			_, err := a.CreateJob(ctx, live, practice.JobInput{Title: ptr("x"), Client: ptr("cli_c-C001"), Owner: ptr("usr_U1partner"), Engagement: ptr("eng_1")})
			return err
		}(), "parameter_invalid"},
		"no owner": {func() error {
			_, err := a.CreateJob(ctx, live, practice.JobInput{Title: ptr("x"), Client: ptr("cli_c-C001")})
			return err
		}(), "parameter_missing"},
		"unknown client in Karbon": {func() error {
			_, err := a.CreateJob(ctx, live, practice.JobInput{Title: ptr("x"), Client: ptr("cli_c-ZZZ"), Owner: ptr("usr_U1partner")})
			return err
		}(), "parameter_invalid"},
	} {
		var inv *practice.InvalidError
		if !errors.As(tc.err, &inv) || inv.Code != tc.code {
			t.Errorf("%s: err = %v, want %s", name, tc.err, tc.code)
		}
	}
	if _, err := a.MoveJob(ctx, live, "job_W0001", practice.StageMove{Stage: "in_review"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.MoveJob(ctx, live, "job_NOPE", practice.StageMove{Stage: "in_review"}); !errors.Is(err, practice.ErrNotFound) {
		t.Fatalf("missing job: %v", err)
	}
}

func TestMoveToAStageTheFirmLacks(t *testing.T) {
	k := fixture(t)
	a, _ := newAdapter(t, k, func(c *karbonConfig, _ *upstream.Deps) {
		// This firm calls its review "Partner check" and maps it; it has
		// no status for filed once "Filed" is mapped elsewhere.
		c.StageMap = map[string]string{"Filed": "completed"}
	})
	_, err := a.MoveJob(context.Background(), live, "job_W0001", practice.StageMove{Stage: "filed"})
	var inv *practice.InvalidError
	if !errors.As(err, &inv) || inv.Code != "invalid_stage" {
		t.Fatalf("err = %v, want invalid_stage", err)
	}
}
