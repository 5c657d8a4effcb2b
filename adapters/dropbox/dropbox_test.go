package dropbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/dropbox"
	"github.com/practicegw/practicegw/adapters/kit/docstore"
	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
)

var (
	live  = practice.Tenant{Firm: "frm_acme"}
	epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
)

func setup(t *testing.T) (*vendortest.Dropbox, *dropbox.Adapter, vendortest.Practice, *vendortest.Clock) {
	t.Helper()
	d := vendortest.NewDropbox()
	t.Cleanup(d.Close)
	// Dropbox keeps no content type.
	p := vendortest.FilePractice(epoch, func(path string, size int64, _ string, at time.Time) string {
		return d.AddFile(path, size, at)
	})
	clock := vendortest.NewClock(epoch)
	cfg := dropbox.Config{Firm: "frm_acme", Root: "/clients", BaseURL: d.URL, PageSize: 7,
		OAuth2: upstream.OAuth2Config{AccessToken: d.Token}, MaxScanPages: 60,
		Upstream: upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second)}}
	a, err := dropbox.New(cfg, upstream.Deps{Clock: clock}, docstore.WithClientLinker(p.Clients))
	if err != nil {
		t.Fatal(err)
	}
	return d, a, p, clock
}

func TestListDocuments(t *testing.T) {
	_, a, p, _ := setup(t)
	raws := vendortest.ListAll(t, a, live, practice.Documents, practice.Filter{}, 10)
	docs := p.CheckDocuments(t, raws, "dropbox", "https://www.dropbox.com/home/Clients/")
	if len(raws) != len(p.Files) || len(docs) != len(p.Files) {
		t.Fatalf("%d documents, %d of the practice, want %d", len(raws), len(docs), len(p.Files))
	}
	recent := vendortest.ListAll(t, a, live, practice.Documents, practice.Filter{UpdatedSince: epoch.Add(50 * time.Hour)}, 10)
	if len(recent) != len(p.Files)-50 {
		t.Fatalf("%d updated since, want %d", len(recent), len(p.Files)-50)
	}
}

func TestGetDocument(t *testing.T) {
	d, a, p, clock := setup(t)
	ctx := context.Background()
	raw, err := a.Get(ctx, live, practice.Documents, filing.DocID(p.IDs[p.Files[4].Path]))
	if err != nil {
		t.Fatal(err)
	}
	var doc practice.Document
	json.Unmarshal(raw, &doc)
	if doc.Kind != "working_paper" || doc.Location.Path != "/Clients/Client 00 Ltd/2024/Working papers/" {
		t.Fatalf("%+v", doc)
	}
	outside := d.AddFile("/Internal/Board minutes.pdf", 1, epoch)
	for _, id := range []string{filing.DocID(outside), filing.DocID("id:nope"), filing.DocID("/Clients/x.pdf"), "doc_%%"} {
		if _, err := a.Get(ctx, live, practice.Documents, id); !errors.Is(err, practice.ErrNotFound) {
			t.Errorf("%s: %v", id, err)
		}
	}
	// Dropbox reads are POSTs, yet idempotent: a 500 is retried.
	d.Faults.Queue(vendortest.Fault{Status: http.StatusInternalServerError})
	if _, err := a.Get(ctx, live, practice.Documents, filing.DocID(p.IDs[p.Files[4].Path])); err != nil || len(clock.Slept()) != 1 {
		t.Fatalf("retry of a read RPC: %v, slept %v", err, clock.Slept())
	}
	d.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"entries": "nope"}`})
	if _, err := a.List(ctx, live, practice.Documents, practice.Query{Limit: 5}); !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("malformed: %v", err)
	}
	// Far enough for the cursor to hold a Dropbox cursor, which Dropbox
	// then retires.
	page, _ := a.List(ctx, live, practice.Documents, practice.Query{Limit: 10})
	d.Faults.Queue(vendortest.Fault{Status: http.StatusConflict, Body: `{"error_summary":"reset/..","error":{".tag":"reset"}}`})
	_, err = a.List(ctx, live, practice.Documents, practice.Query{Limit: 5, Cursor: page.Next})
	var inv *practice.InvalidError
	if !errors.As(err, &inv) || inv.Code != "invalid_cursor" {
		t.Fatalf("a reset Dropbox cursor: %v", err)
	}
}
