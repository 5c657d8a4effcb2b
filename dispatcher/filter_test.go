package dispatcher

import (
	"errors"
	"testing"

	"github.com/practicegw/practicegw/practice"
)

func TestKindFilter(t *testing.T) {
	for _, tc := range []struct {
		filter []string
		kind   string
		name   string // "" when not received
	}{
		{[]string{"*"}, JobOpened, JobOpened},
		{[]string{"job.*"}, JobStageChanged, JobStageChanged},
		{[]string{"job.*"}, InvoicePaid, ""},
		{[]string{"invoice.paid", "job.*"}, InvoicePaid, InvoicePaid},
		{[]string{"invoice.paid"}, InvoiceRaised, ""},
		{[]string{EngagementLetterSign}, EngagementSigned, EngagementLetterSign},
		{[]string{EngagementLetterSign, "engagement.*"}, EngagementSigned, EngagementSigned},
		{[]string{EngagementLetterSign, "*"}, EngagementSigned, EngagementSigned},
		{[]string{"engagement.*"}, EngagementCreated, EngagementCreated},
		// Removals go only to subscribers that name them: "*" and a
		// resource's pattern mean what they meant before removals had
		// events.
		{[]string{"*"}, ClientDeleted, ""},
		{[]string{"client.*"}, ClientDeleted, ""},
		{[]string{"client.deleted"}, ClientDeleted, ClientDeleted},
		{[]string{"*", "job.deleted"}, JobDeleted, JobDeleted},
		{[]string{"*", "job.deleted"}, ClientDeleted, ""},
		{[]string{"person.deleted"}, PersonDeleted, PersonDeleted},
	} {
		f, err := ParseKindFilter(tc.filter)
		if err != nil {
			t.Fatalf("%v: %v", tc.filter, err)
		}
		name, ok := f.DeliveryName(tc.kind)
		if name != tc.name || ok != (tc.name != "") {
			t.Errorf("%v receives %s as %q, %v; want %q", tc.filter, tc.kind, name, ok, tc.name)
		}
	}
	for _, bad := range [][]string{nil, {"job.removed"}, {"person.*"}, {"job*"}, {".*"}, {"engagement_letter.*"}} {
		var invalid *practice.InvalidError
		if _, err := ParseKindFilter(bad); !errors.As(err, &invalid) || invalid.Param != "events" {
			t.Errorf("ParseKindFilter(%q) = %v, want an invalid events parameter", bad, err)
		}
	}
	if f, _ := ParseKindFilter([]string{"job.*", "job.*", "*"}); len(f) != 2 {
		t.Errorf("duplicates kept: %v", f)
	}
}
