package proposals_test

import (
	"context"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/proposals"
	"github.com/practicegw/practicegw/practice/changes"
)

func TestStatus(t *testing.T) {
	for state, want := range map[string]string{
		"Draft": "proposed", "DRAFT": "proposed", "SENT": "sent", "Issued": "sent", "ACCEPTED": "signed",
		"Declined": "declined", "DECLINED": "declined", "INVOICED": "ended", "Archived": "ended", "DELETED": "ended",
		"  accepted ": "signed",
	} {
		if got, err := proposals.Status(state); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", state, got, err, want)
		}
	}
	for _, state := range []string{"", "Pondering", "signed"} {
		if got, err := proposals.Status(state); err == nil {
			t.Errorf("%q is no vendor's state, got %q", state, got)
		}
	}
}

func TestScope(t *testing.T) {
	for _, c := range []struct {
		title string
		tasks []string
		want  string
	}{
		{"Year-end accounts", []string{"Accounts preparation", " ", "Corporation tax return", "Accounts preparation"},
			"Year-end accounts: Accounts preparation, Corporation tax return"},
		{"Payroll", nil, "Payroll"},
		{"", []string{"Bookkeeping"}, "Bookkeeping"},
		{"Audit", []string{"Audit"}, "Audit"},
	} {
		if got := proposals.Scope(c.title, c.tasks); got != c.want {
			t.Errorf("Scope(%q, %q) = %q, want %q", c.title, c.tasks, got, c.want)
		}
	}
}

func TestSigningsRememberTheFirstAcceptance(t *testing.T) {
	ctx := context.Background()
	s := proposals.Signings{State: changes.NewMemoryState(), Firm: "frm_acme"}
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	if at, err := s.At(ctx, "eng_1", false, t0); err != nil || at != nil {
		t.Fatalf("never accepted: %v %v", at, err)
	}
	if at, err := s.At(ctx, "eng_1", true, t0.Add(time.Hour)); err != nil || at == nil || !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("accepted: %v %v", at, err)
	}
	for _, accepted := range []bool{true, false, true} {
		if at, err := s.At(ctx, "eng_1", accepted, t0.Add(5*time.Hour)); err != nil || at == nil || !at.Equal(t0.Add(time.Hour)) {
			t.Fatalf("later read (accepted %v): %v %v", accepted, at, err)
		}
	}
	if at, _ := s.At(ctx, "eng_2", false, t0); at != nil {
		t.Errorf("another engagement: %v", at)
	}
}
