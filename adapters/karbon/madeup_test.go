package karbon_test

import (
	"encoding/json"
	"testing"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/recordscan"
)

// Nothing a Karbon record says is made up: a client without an owner, a
// work item without an assignee and names with '&' and '<' read as
// Karbon has them, with no zero time and null for what Karbon does not
// publish (a client's creation time above all), listed and read alone.
func TestKarbonRecordsMakeNothingUp(t *testing.T) {
	nullable := recordscan.Repository(t)
	k := fixture(t)
	k.AddContact(vendortest.KarbonContact{ContactKey: "C900", FirstName: "Dunmore", LastName: "& Sons <Holdings>",
		ContactType: "Client", Email: "d@dunmore.example", Country: "GB", LastModified: epoch})
	k.AddWorkItem(vendortest.KarbonWorkItem{WorkItemKey: "W9000", Title: "Accounts & VAT <2026>", ClientKey: "C900",
		ClientType: "Contact", StartDate: epoch.Format("2006-01-02T15:04:05Z07:00"), WorkType: "Accounts",
		PrimaryStatus: "Planned"})
	billing(t, k)
	a, _ := newAdapter(t, k)
	counts := recordscan.Records(t, a, live, nullable, practice.Clients, practice.Jobs)
	recordscan.Want(t, counts, map[practice.Kind]int{practice.Clients: 100, practice.Jobs: 200})
	ledger := ledgerAdapter(t, k)
	recordscan.Want(t, recordscan.Records(t, ledger, live, nullable, practice.Invoices), map[practice.Kind]int{practice.Invoices: 200})

	var c practice.Client
	raw, err := a.Get(t.Context(), live, practice.Clients, "cli_c-C900")
	if err != nil || json.Unmarshal(raw, &c) != nil {
		t.Fatalf("read: %v, %s", err, raw)
	}
	if c.Owner != nil || c.CreatedAt != nil || c.Name != "Dunmore & Sons <Holdings>" {
		t.Errorf("a client without an owner reads %s", raw)
	}
	var j practice.Job
	raw, err = a.Get(t.Context(), live, practice.Jobs, "job_W9000")
	if err != nil || json.Unmarshal(raw, &j) != nil {
		t.Fatalf("read: %v, %s", err, raw)
	}
	if j.Owner != nil || j.CreatedAt == nil || !j.CreatedAt.Equal(epoch) {
		t.Errorf("a work item without an assignee reads %s", raw)
	}
}
