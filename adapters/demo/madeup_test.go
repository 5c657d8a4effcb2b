package demo

import (
	"testing"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/recordscan"
)

// Nothing a demo record says is made up, as on a firm's real systems: no
// zero time, no escape of '<', '>' or '&', and no empty string where the
// document declares a field nullable, in every kind, listed and read
// alone, and in a client written with '&' and '<' in its name.
func TestDemoRecordsMakeNothingUp(t *testing.T) {
	nullable := recordscan.Repository(t)
	r, _ := openAcme(t)
	name := "Birch & Vane <Trust>"
	raw, err := r.CreateClient(t.Context(), acme, practice.ClientInput{Name: &name})
	if err != nil {
		t.Fatal(err)
	}
	recordscan.Check(t, "a client created", raw, nullable)
	counts := recordscan.Records(t, r, acme, nullable, practice.Kinds...)
	recordscan.Want(t, counts, map[practice.Kind]int{practice.Clients: 250, practice.Jobs: 1000, practice.Engagements: 300,
		practice.Documents: 2000, practice.Invoices: 1500, practice.People: 25})
}
