package graph_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters"
	"github.com/practicegw/practicegw/adapters/filing"
	"github.com/practicegw/practicegw/adapters/graph"
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

func setup(t *testing.T) (*vendortest.Graph, *graph.Adapter, []vendortest.DocFile, map[string]string) {
	t.Helper()
	g := vendortest.NewGraph()
	t.Cleanup(g.Close)
	files := vendortest.PracticeFiles("/Clients", 12, epoch)
	ids := map[string]string{}
	for _, f := range files {
		ids[f.Path] = g.AddFile(f.Path, f.Size, f.MimeType, f.Modified)
	}
	g.AddFile("/Internal/Payroll 2025.xlsx", 10, "application/pdf", epoch)
	cfg := graph.Config{Firm: "frm_acme", DriveID: g.DriveID, Root: "/Clients", BaseURL: g.URL, PageSize: 4,
		OAuth2: upstream.OAuth2Config{AccessToken: g.Token}, MaxScanPages: 50,
		Upstream: upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second), MaxAttempts: 1}}
	a, err := graph.New(cfg, upstream.Deps{Clock: vendortest.NewClock(epoch)}, graph.WithClientResolver(names{"Client 03 Ltd": "cli_o-O3"}))
	if err != nil {
		t.Fatal(err)
	}
	return g, a, files, ids
}

func TestListDocuments(t *testing.T) {
	_, a, files, ids := setup(t)
	byID := map[string]vendortest.DocFile{}
	for _, f := range files {
		byID[ids[f.Path]] = f
	}
	for _, limit := range []int{7, 50} {
		raws := vendortest.ListAll(t, a, live, adapters.Documents, adapters.Filter{}, limit)
		if len(raws) != len(files) {
			t.Fatalf("limit %d: %d documents, want %d", limit, len(raws), len(files))
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
				t.Fatalf("unexpected document %+v", d)
			}
			dir := f.Path[:strings.LastIndex(f.Path, "/")+1]
			if d.Kind != f.Kind || d.Location.Path != dir || d.Location.Provider != "sharepoint" || d.Location.DriveID == "" ||
				!strings.HasPrefix(d.Location.WebURL, "https://") || d.SizeBytes != f.Size || d.MimeType != f.MimeType ||
				!d.UpdatedAt.Equal(f.Modified) || d.ID != filing.DocID(d.Location.ItemID) {
				t.Fatalf("document %+v\nfile %+v", d, f)
			}
			if wantClient := map[bool]string{true: "cli_o-O3"}[f.Client == "Client 03 Ltd"]; d.Client != wantClient {
				t.Fatalf("%s: client %q", f.Path, d.Client)
			}
		}
	}
	recent := vendortest.ListAll(t, a, live, adapters.Documents, adapters.Filter{UpdatedSince: epoch.Add(100 * time.Hour)}, 10)
	if len(recent) != len(files)-100 {
		t.Fatalf("%d updated since, want %d", len(recent), len(files)-100)
	}
}

func TestGetDocument(t *testing.T) {
	g, a, files, ids := setup(t)
	ctx := context.Background()
	raw, err := a.Get(ctx, live, adapters.Documents, filing.DocID(ids[files[1].Path]))
	if err != nil {
		t.Fatal(err)
	}
	var d adapters.Document
	json.Unmarshal(raw, &d)
	if d.Kind != "signed_engagement_letter" || d.Location.Path != "/Clients/Client 00 Ltd/2025/Engagement letters/" {
		t.Fatalf("%+v", d)
	}
	outside := g.AddFile("/Internal/Board minutes.pdf", 1, "application/pdf", epoch)
	for _, id := range []string{filing.DocID(outside), filing.DocID("01NOPE"), "doc_!!", filing.DocID("01ROOT")} {
		if _, err := a.Get(ctx, live, adapters.Documents, id); !errors.Is(err, adapters.ErrNotFound) {
			t.Errorf("%s: %v", id, err)
		}
	}
}

func TestGraphFailures(t *testing.T) {
	g, a, files, ids := setup(t)
	ctx := context.Background()
	g.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"value":[{"id":"x","name":"a.pdf","file":{},"createdDateTime":"not a time","lastModifiedDateTime":"2026-01-01T00:00:00Z"}]}`})
	if _, err := a.List(ctx, live, adapters.Documents, adapters.Query{Limit: 5}); !errors.Is(err, adapters.ErrBadUpstream) {
		t.Fatalf("malformed: %v", err)
	}
	g.Faults.Queue(vendortest.Fault{Status: http.StatusTooManyRequests, RetryAfter: "30",
		Body: `{"error":{"code":"activityLimitReached","message":"The request has been throttled"}}`})
	_, err := a.Get(ctx, live, adapters.Documents, filing.DocID(ids[files[0].Path]))
	if ra, _ := upstream.RetryAfter(err); !errors.Is(err, adapters.ErrUnavailable) || ra != 30*time.Second {
		t.Fatalf("throttled: %v", err)
	}
	// A cursor cannot point the adapter at another host.
	forged := upstream.Cursor{Stack: []upstream.Frame{{Page: "https://evil.example/steal"}}}.Encode()
	if _, err := a.List(ctx, live, adapters.Documents, adapters.Query{Limit: 5, Cursor: forged}); err == nil {
		t.Fatal("a forged cursor was followed")
	}
}
