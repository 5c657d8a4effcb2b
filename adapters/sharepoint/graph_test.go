package sharepoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/docstore"
	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/sharepoint"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
)

var (
	live  = practice.Tenant{Firm: "frm_acme"}
	epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
)

func setup(t *testing.T) (*vendortest.Graph, *sharepoint.Adapter, vendortest.Practice) {
	t.Helper()
	g := vendortest.NewGraph()
	t.Cleanup(g.Close)
	p := vendortest.FilePractice(epoch, g.AddFile)
	cfg := sharepoint.Config{Firm: "frm_acme", DriveID: g.DriveID, Root: "/Clients", BaseURL: g.URL, PageSize: 4,
		OAuth2: upstream.OAuth2Config{AccessToken: g.Token}, MaxScanPages: 50,
		Upstream: upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second), MaxAttempts: 1}}
	a, err := sharepoint.New(cfg, upstream.Deps{Clock: vendortest.NewClock(epoch)}, docstore.WithClientLinker(p.Clients))
	if err != nil {
		t.Fatal(err)
	}
	return g, a, p
}

func TestListDocuments(t *testing.T) {
	_, a, p := setup(t)
	for _, limit := range []int{7, 50} {
		raws := vendortest.ListAll(t, a, live, practice.Documents, practice.Filter{}, limit)
		docs := p.CheckDocuments(t, raws, "sharepoint", "https://")
		if len(raws) != len(p.Files) || len(docs) != len(p.Files) {
			t.Fatalf("limit %d: %d documents, %d of the practice, want %d", limit, len(raws), len(docs), len(p.Files))
		}
		for _, d := range docs {
			if d.Location.DriveID == "" {
				t.Fatalf("no drive id: %+v", d)
			}
		}
	}
	recent := vendortest.ListAll(t, a, live, practice.Documents, practice.Filter{UpdatedSince: epoch.Add(100 * time.Hour)}, 10)
	if len(recent) != len(p.Files)-100 {
		t.Fatalf("%d updated since, want %d", len(recent), len(p.Files)-100)
	}
}

func TestGetDocument(t *testing.T) {
	g, a, p := setup(t)
	ctx := context.Background()
	raw, err := a.Get(ctx, live, practice.Documents, filing.DocID(p.IDs[p.Files[1].Path]))
	if err != nil {
		t.Fatal(err)
	}
	var d practice.Document
	json.Unmarshal(raw, &d)
	if d.Kind != "signed_engagement_letter" || d.Location.Path != "/Clients/Client 00 Ltd/2025/Engagement letters/" {
		t.Fatalf("%+v", d)
	}
	outside := g.AddFile("/Internal/Board minutes.pdf", 1, "application/pdf", epoch)
	for _, id := range []string{filing.DocID(outside), filing.DocID("01NOPE"), "doc_!!", filing.DocID("01ROOT")} {
		if _, err := a.Get(ctx, live, practice.Documents, id); !errors.Is(err, practice.ErrNotFound) {
			t.Errorf("%s: %v", id, err)
		}
	}
}

func TestGraphFailures(t *testing.T) {
	g, a, p := setup(t)
	ctx := context.Background()
	g.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"value":[{"id":"x","name":"a.pdf","file":{},"createdDateTime":"not a time","lastModifiedDateTime":"2026-01-01T00:00:00Z"}]}`})
	// A file that cannot be read is its document's alone.
	if page, err := a.List(ctx, live, practice.Documents, practice.Query{Limit: 5}); err != nil || len(page.Unusable) != 1 ||
		page.Unusable[0].ID != filing.DocID("x") || !errors.Is(page.Unusable[0], practice.ErrBadUpstream) {
		t.Fatalf("malformed: unusable %v, %v", page.Unusable, err)
	}
	g.Faults.Queue(vendortest.Fault{Status: http.StatusTooManyRequests, RetryAfter: "30",
		Body: `{"error":{"code":"activityLimitReached","message":"The request has been throttled"}}`})
	_, err := a.Get(ctx, live, practice.Documents, filing.DocID(p.IDs[p.Files[0].Path]))
	if ra, _ := practice.RetryAfter(err); !errors.Is(err, practice.ErrUnavailable) || ra != 30*time.Second {
		t.Fatalf("throttled: %v", err)
	}
	// A cursor cannot point the adapter at another host.
	forged := paging.Cursor{Stack: []paging.Frame{{Page: "https://evil.example/steal"}}}.Encode()
	if _, err := a.List(ctx, live, practice.Documents, practice.Query{Limit: 5, Cursor: forged}); err == nil {
		t.Fatal("a forged cursor was followed")
	}
}
