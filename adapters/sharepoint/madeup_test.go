package sharepoint_test

import (
	"encoding/json"
	"testing"

	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/recordscan"
)

// Nothing a document says is made up: a file outside every client's
// folder names no client (null, not empty), and a path with '&' and '<'
// reads as the store has it, listed and read alone.
func TestDocumentsMakeNothingUp(t *testing.T) {
	nullable := recordscan.Repository(t)
	g, a, _ := setup(t)
	id := g.AddFile("/Clients/Firm templates & <drafts>/Letter.pdf", 1200, "application/pdf", epoch)
	counts := recordscan.Records(t, a, live, nullable, practice.Documents)
	recordscan.Want(t, counts, map[practice.Kind]int{practice.Documents: 10})
	raw, err := a.Get(t.Context(), live, practice.Documents, filing.DocID(id))
	var d practice.Document
	if err != nil || json.Unmarshal(raw, &d) != nil {
		t.Fatalf("read: %v, %s", err, raw)
	}
	if d.Client != nil || d.Location.Path != "/Clients/Firm templates & <drafts>/" {
		t.Errorf("a file outside the clients' folders reads %s", raw)
	}
}
