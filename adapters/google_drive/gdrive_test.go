package googledrive_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/google_drive"
	"github.com/practicegw/practicegw/adapters/kit/docstore"
	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

var (
	live  = practice.Tenant{Firm: "frm_acme"}
	epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
)

func setup(t *testing.T) (*vendortest.GDrive, *googledrive.Adapter, vendortest.Practice) {
	t.Helper()
	d := vendortest.NewGDrive()
	t.Cleanup(d.Close)
	p := vendortest.FilePractice(epoch, d.AddFile)
	d.AddFile("/Clients/.keep", 0, "text/plain", epoch)
	cfg := googledrive.Config{Firm: "frm_acme", BaseURL: d.URL, PageSize: 4, RootFolderID: "root", RootPath: "/",
		OAuth2: upstream.OAuth2Config{AccessToken: d.Token}, MaxScanPages: 60,
		Upstream: upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second), MaxAttempts: 1},
		Filing:   filing.Config{ClientDepth: 2}}
	a, err := googledrive.New(cfg, upstream.Deps{}, docstore.WithClientLinker(p.Clients))
	if err != nil {
		t.Fatal(err)
	}
	return d, a, p
}

func TestListDocuments(t *testing.T) {
	_, a, p := setup(t)
	raws := vendortest.ListAll(t, a, live, practice.Documents, practice.Filter{}, 9)
	// Every practice file, the internal one and the .keep.
	if len(raws) != len(p.Files)+2 {
		t.Fatalf("%d documents, want %d", len(raws), len(p.Files)+2)
	}
	if docs := p.CheckDocuments(t, raws, "google_drive", "https://drive.google.com/"); len(docs) != len(p.Files) {
		t.Fatalf("checked %d", len(docs))
	}
}

func TestGetWalksParents(t *testing.T) {
	d, a, p := setup(t)
	ctx := context.Background()
	raw, err := a.Get(ctx, live, practice.Documents, filing.DocID(p.IDs[p.Files[6].Path]))
	if err != nil {
		t.Fatal(err)
	}
	var doc practice.Document
	json.Unmarshal(raw, &doc)
	if doc.Kind != "tax_return" || doc.Location.Path != "/Clients/Client 00 Ltd/2024/Tax return/" {
		t.Fatalf("%+v", doc)
	}
	for _, id := range []string{filing.DocID("1drvNOPE"), "doc_", filing.DocID("root")} {
		if _, err := a.Get(ctx, live, practice.Documents, id); !errors.Is(err, practice.ErrNotFound) {
			t.Errorf("%s: %v", id, err)
		}
	}
	d.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"id":"x","name":"a.pdf","mimeType":"application/pdf","size":"many"`})
	if _, err := a.Get(ctx, live, practice.Documents, filing.DocID(p.IDs[p.Files[0].Path])); !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("malformed: %v", err)
	}
}

func TestScopedToRootFolder(t *testing.T) {
	d := vendortest.NewGDrive()
	defer d.Close()
	inside := d.AddFile("/Clients/Acme/2025/Tax return/SA100.pdf", 1, "application/pdf", epoch)
	outside := d.AddFile("/Internal/Board minutes.pdf", 1, "application/pdf", epoch)
	// With the drive's root as the filing root, paths come from walking
	// the parents.
	probe, _ := googledrive.New(googledrive.Config{BaseURL: d.URL, OAuth2: upstream.OAuth2Config{AccessToken: d.Token}}, upstream.Deps{})
	raw, err := probe.Get(context.Background(), live, practice.Documents, filing.DocID(inside))
	if err != nil {
		t.Fatal(err)
	}
	var doc practice.Document
	json.Unmarshal(raw, &doc)
	if doc.Location.Path != "/Clients/Acme/2025/Tax return/" || doc.Kind != "tax_return" {
		t.Fatalf("%+v", doc)
	}
	// The Clients folder is the double's first folder.
	a, _ := googledrive.New(googledrive.Config{BaseURL: d.URL, OAuth2: upstream.OAuth2Config{AccessToken: d.Token},
		RootFolderID: "1drv000001", RootPath: "/Clients"}, upstream.Deps{})
	if _, err := a.Get(context.Background(), live, practice.Documents, filing.DocID(outside)); !errors.Is(err, practice.ErrNotFound) {
		t.Fatalf("a file outside the root: %v", err)
	}
	raw, err = a.Get(context.Background(), live, practice.Documents, filing.DocID(inside))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(raw, &doc)
	if doc.Location.Path != "/Clients/Acme/2025/Tax return/" {
		t.Fatalf("%+v", doc)
	}
}

// A folder above a document renamed or moved changes the document's path
// while Drive keeps the file's modifiedTime: the document's version
// rises, on every instance sharing the state store.
func TestAFolderMovedAboveMovesTheVersion(t *testing.T) {
	d := vendortest.NewGDrive()
	t.Cleanup(d.Close)
	file := d.AddFile("/Clients/Acme Ltd/2025/Tax return/SA100.pdf", 1, "application/pdf", epoch)
	state := changes.NewMemoryState()
	clock := vendortest.NewClock(epoch.Add(24 * time.Hour))
	open := func() *googledrive.Adapter {
		cfg := googledrive.Config{Firm: "frm_acme", BaseURL: d.URL, RootFolderID: "root", RootPath: "/",
			OAuth2:   upstream.OAuth2Config{AccessToken: d.Token},
			Upstream: upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second), MaxAttempts: 1}}
		a, err := googledrive.New(cfg, upstream.Deps{State: state, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	read := func(a *googledrive.Adapter) practice.Document {
		t.Helper()
		raw, err := a.Get(context.Background(), live, practice.Documents, filing.DocID(file))
		if err != nil {
			t.Fatal(err)
		}
		var doc practice.Document
		_ = json.Unmarshal(raw, &doc)
		return doc
	}
	before := read(open())
	if !before.UpdatedAt.Equal(epoch) || before.Version != epoch.UnixMilli() {
		t.Fatalf("first read: %+v, want Drive's modifiedTime", before)
	}
	clock.Advance(time.Hour)
	d.Move(d.Lookup("/Clients/Acme Ltd/2025"), "/Clients/Acme Ltd/Archive", clock.Now())
	moved := read(open())
	if moved.Location.Path != "/Clients/Acme Ltd/Archive/2025/Tax return/" || moved.Version <= before.Version || moved.UpdatedAt.Before(clock.Now()) {
		t.Fatalf("after its folder moved: %+v; before %+v", moved, before)
	}
	if again := read(open()); again.Version != moved.Version {
		t.Fatalf("another instance: version %d, want %d", again.Version, moved.Version)
	}
}
