package xpm_test

import (
	"encoding/json"
	"testing"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/recordscan"
)

// Nothing an XPM record says is made up: XPM publishes no creation time,
// so a client's and a staff member's created_at are null (not the time
// the gateway first read them), a client or job with no manager has a
// null owner, a staff member without an email a null email, and names
// with '&' and '<' read as written, listed and read alone.
func TestXPMRecordsMakeNothingUp(t *testing.T) {
	nullable := recordscan.Repository(t)
	e := newEnv(t)
	addQuotes(e.x)
	e.x.AddStaff(vendortest.XPMStaff{UUID: staffID(9), Name: "Temp & <Agency>"})
	e.x.AddClient(vendortest.XPMClient{UUID: clientID(90), Name: "Dunmore & Sons <Holdings> Ltd", Country: "United Kingdom",
		Modified: epoch})
	e.x.AddJob(vendortest.XPMJob{ID: "J000900", UUID: "10b00000-0000-4000-8000-000000000900", Name: "Accounts & VAT",
		ClientUUID: clientID(90), State: "Planned", Type: "Accounts", Due: epoch.AddDate(0, 1, 0), Created: epoch})
	counts := recordscan.Records(t, e.a, live, nullable,
		practice.Clients, practice.Jobs, practice.People, practice.Invoices, practice.Engagements)
	recordscan.Want(t, counts, map[practice.Kind]int{practice.Clients: 20, practice.Jobs: 20, practice.People: 4,
		practice.Invoices: 5, practice.Engagements: 3})

	var c practice.Client
	raw, err := e.a.Get(t.Context(), live, practice.Clients, "cli_"+clientID(90))
	if err != nil || json.Unmarshal(raw, &c) != nil {
		t.Fatalf("read: %v, %s", err, raw)
	}
	if c.Owner != nil || c.CreatedAt != nil || c.Name != "Dunmore & Sons <Holdings> Ltd" {
		t.Errorf("a client without a manager reads %s", raw)
	}
	var j practice.Job
	raw, err = e.a.Get(t.Context(), live, practice.Jobs, "job_J000900")
	if err != nil || json.Unmarshal(raw, &j) != nil {
		t.Fatalf("read: %v, %s", err, raw)
	}
	if j.Owner != nil || j.CreatedAt != nil {
		t.Errorf("a job without a manager or a start date reads %s", raw)
	}
	var p practice.Person
	raw, err = e.a.Get(t.Context(), live, practice.People, "usr_"+staffID(9))
	if err != nil || json.Unmarshal(raw, &p) != nil {
		t.Fatalf("read: %v, %s", err, raw)
	}
	if p.Email != nil || p.CreatedAt != nil {
		t.Errorf("a staff member without an email reads %s", raw)
	}
}
