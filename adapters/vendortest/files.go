package vendortest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/practice"
)

// DocFile is a file in a practice's document store, with the kind the
// filing conventions should read from where it is.
type DocFile struct {
	Path     string // from the store's root
	Client   string // the client folder's name
	Kind     string
	Size     int64
	MimeType string
	Modified time.Time
}

// practiceFiles lays out clients' folders under root the way practices
// file them: <root>/<client>/<year>/<kind folder>/<file>, nine files a
// client, modified an hour apart.
func practiceFiles(root string, clients int, at time.Time) []DocFile {
	const pdf, xlsx, docx = "application/pdf", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
		"application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	var out []DocFile
	n := 0
	for i := range clients {
		client := fmt.Sprintf("Client %02d Ltd", i)
		for _, f := range []struct{ rel, kind, mime string }{
			{"2025/Engagement letters/Engagement letter 2025 - " + client + ".pdf", "engagement_letter", pdf},
			{"2025/Engagement letters/Engagement letter 2025 - " + client + " (signed).pdf", "signed_engagement_letter", pdf},
			{"2025/Identity/Passport - Ann Smith.pdf", "identity_verification", pdf},
			{"2024/Source documents/Bank statements March 2024.pdf", "source_document", pdf},
			{"2024/Working papers/Trial balance 2024.xlsx", "working_paper", xlsx},
			{"2024/Accounts/Financial statements 2024.pdf", "financial_statements", pdf},
			{"2024/Tax return/CT600 2024.pdf", "tax_return", pdf},
			{"2025/Correspondence/HMRC letter 2025-03-01.pdf", "correspondence", pdf},
			{"2025/Other/Meeting notes 2025-02-11.docx", "other", docx},
		} {
			out = append(out, DocFile{Path: root + "/" + client + "/" + f.rel, Client: client, Kind: f.kind,
				Size: int64(40_000 + n), MimeType: f.mime, Modified: at.Add(time.Duration(n) * time.Hour)})
			n++
		}
	}
	return out
}

// Practice is practiceFiles filed in a store double.
type Practice struct {
	Files []DocFile
	// IDs are the files' item ids in the store, by path.
	IDs map[string]string
	// Clients links the folder "Client 03 Ltd" to its client, cli_o-O3,
	// and no other: a document store adapter's client resolver.
	Clients ClientFolders
}

// FilePractice files practiceFiles("/Clients", 12, at) into a store
// double with add, which returns the item id, and beside them a payroll
// sheet under /Internal, outside the filing root.
func FilePractice(at time.Time, add func(path string, size int64, mime string, at time.Time) string) Practice {
	p := Practice{Files: practiceFiles("/Clients", 12, at), IDs: map[string]string{},
		Clients: ClientFolders{"Client 03 Ltd": "cli_o-O3"}}
	for _, f := range p.Files {
		p.IDs[f.Path] = add(f.Path, f.Size, f.MimeType, f.Modified)
	}
	add("/Internal/Payroll 2025.xlsx", 10, "application/pdf", at)
	return p
}

// CheckDocuments decodes listed documents, refusing fields the contract
// does not have, and checks each that was made from one of the files
// against it: id, kind, folder path, type, size, update time, client,
// provider and a web URL starting with webURL. It returns those
// documents; the others were of no file of the practice.
func (p Practice) CheckDocuments(t testing.TB, raws []json.RawMessage, provider, webURL string) []practice.Document {
	t.Helper()
	byID := map[string]DocFile{}
	for _, f := range p.Files {
		byID[p.IDs[f.Path]] = f
	}
	var out []practice.Document
	for _, raw := range raws {
		var d practice.Document
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			t.Fatal(err)
		}
		f, ok := byID[d.Location.ItemID]
		if !ok {
			continue
		}
		dir := f.Path[:strings.LastIndex(f.Path, "/")+1]
		if d.Kind != f.Kind || d.Location.Path != dir || d.Location.Provider != provider ||
			!strings.HasPrefix(d.Location.WebURL, webURL) || d.SizeBytes != f.Size || d.MimeType != f.MimeType ||
			!d.UpdatedAt.Equal(f.Modified) || d.ID != filing.DocID(d.Location.ItemID) {
			t.Fatalf("document %+v\nfile %+v", d, f)
		}
		if want := p.Clients[f.Client]; practice.ValueOf(d.Client) != want || want == "" && d.Client != nil {
			t.Fatalf("%s: client %v", f.Path, d.Client)
		}
		out = append(out, d)
	}
	return out
}

// ClientFolders is a records system's linker (linking.Linker) over client
// folder names, exactly as written.
type ClientFolders map[string]string

// LinkClient is the client of the folder name, missing for none.
func (c ClientFolders) LinkClient(_ context.Context, _ practice.Tenant, cand linking.Candidate) (linking.Link, error) {
	if id := c[cand.Name]; id != "" {
		return linking.Link{Client: id, Outcome: linking.Linked}, nil
	}
	return linking.Link{}, nil
}
