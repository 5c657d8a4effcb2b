package dropbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters"
	"github.com/practicegw/practicegw/adapters/dropbox"
	"github.com/practicegw/practicegw/adapters/filing"
	"github.com/practicegw/practicegw/adapters/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
)

var (
	live  = adapters.Tenant{Firm: "frm_acme"}
	epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
)

type names map[string]string

func (n names) ClientForFolder(_ context.Context, _ adapters.Tenant, name string) (string, error) {
	return n[name], nil
}

func setup(t *testing.T) (*vendortest.Dropbox, *dropbox.Adapter, []vendortest.DocFile, map[string]string, *vendortest.Clock) {
	t.Helper()
	d := vendortest.NewDropbox()
	t.Cleanup(d.Close)
	files := vendortest.PracticeFiles("/Clients", 12, epoch)
	ids := map[string]string{}
	for _, f := range files {
		ids[f.Path] = d.AddFile(f.Path, f.Size, f.Modified)
	}
	d.AddFile("/Internal/Payroll 2025.xlsx", 10, epoch)
	clock := vendortest.NewClock(epoch)
	cfg := dropbox.Config{Firm: "frm_acme", Root: "/clients", BaseURL: d.URL, PageSize: 7,
		OAuth2: upstream.OAuth2Config{AccessToken: d.Token}, MaxScanPages: 60,
		Upstream: upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second)}}
	a, err := dropbox.New(cfg, upstream.Deps{Clock: clock}, dropbox.WithClientResolver(names{"Client 03 Ltd": "cli_o-O3"}))
	if err != nil {
		t.Fatal(err)
	}
	return d, a, files, ids, clock
}

func TestListDocuments(t *testing.T) {
	_, a, files, ids, _ := setup(t)
	byID := map[string]vendortest.DocFile{}
	for _, f := range files {
		byID[ids[f.Path]] = f
	}
	raws := vendortest.ListAll(t, a, live, adapters.Documents, adapters.Filter{}, 10)
	if len(raws) != len(files) {
		t.Fatalf("%d documents, want %d", len(raws), len(files))
	}
	for _, raw := range raws {
		var d adapters.Document
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			t.Fatal(err)
		}
		f, ok := byID[d.Location.ItemID]
		if !ok {
			t.Fatalf("unexpected %+v", d)
		}
		dir := f.Path[:strings.LastIndex(f.Path, "/")+1]
		if d.Kind != f.Kind || d.Location.Path != dir || d.Location.Provider != "dropbox" || d.MimeType != f.MimeType ||
			!strings.HasPrefix(d.Location.WebURL, "https://www.dropbox.com/home/Clients/") || d.SizeBytes != f.Size ||
			!d.UpdatedAt.Equal(f.Modified) || !strings.HasPrefix(d.Location.ItemID, "id:") {
			t.Fatalf("document %+v\nfile %+v", d, f)
		}
		if wantClient := map[bool]string{true: "cli_o-O3"}[f.Client == "Client 03 Ltd"]; d.Client != wantClient {
			t.Fatalf("%s: client %q", f.Path, d.Client)
		}
	}
	recent := vendortest.ListAll(t, a, live, adapters.Documents, adapters.Filter{UpdatedSince: epoch.Add(50 * time.Hour)}, 10)
	if len(recent) != len(files)-50 {
		t.Fatalf("%d updated since, want %d", len(recent), len(files)-50)
	}
}

func TestGetDocument(t *testing.T) {
	d, a, files, ids, clock := setup(t)
	ctx := context.Background()
	raw, err := a.Get(ctx, live, adapters.Documents, filing.DocID(ids[files[4].Path]))
	if err != nil {
		t.Fatal(err)
	}
	var doc adapters.Document
	json.Unmarshal(raw, &doc)
	if doc.Kind != "working_paper" || doc.Location.Path != "/Clients/Client 00 Ltd/2024/Working papers/" {
		t.Fatalf("%+v", doc)
	}
	outside := d.AddFile("/Internal/Board minutes.pdf", 1, epoch)
	for _, id := range []string{filing.DocID(outside), filing.DocID("id:nope"), filing.DocID("/Clients/x.pdf"), "doc_%%"} {
		if _, err := a.Get(ctx, live, adapters.Documents, id); !errors.Is(err, adapters.ErrNotFound) {
			t.Errorf("%s: %v", id, err)
		}
	}
	// Dropbox reads are POSTs, yet idempotent: a 500 is retried.
	d.Faults.Queue(vendortest.Fault{Status: http.StatusInternalServerError})
	if _, err := a.Get(ctx, live, adapters.Documents, filing.DocID(ids[files[4].Path])); err != nil || len(clock.Slept()) != 1 {
		t.Fatalf("retry of a read RPC: %v, slept %v", err, clock.Slept())
	}
	d.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"entries": "nope"}`})
	if _, err := a.List(ctx, live, adapters.Documents, adapters.Query{Limit: 5}); !errors.Is(err, adapters.ErrBadUpstream) {
		t.Fatalf("malformed: %v", err)
	}
	// Far enough for the cursor to hold a Dropbox cursor, which Dropbox
	// then retires.
	p, _ := a.List(ctx, live, adapters.Documents, adapters.Query{Limit: 10})
	d.Faults.Queue(vendortest.Fault{Status: http.StatusConflict, Body: `{"error_summary":"reset/..","error":{".tag":"reset"}}`})
	_, err = a.List(ctx, live, adapters.Documents, adapters.Query{Limit: 5, Cursor: p.Next})
	var inv *adapters.InvalidError
	if !errors.As(err, &inv) || inv.Code != "invalid_cursor" {
		t.Fatalf("a reset Dropbox cursor: %v", err)
	}
}
