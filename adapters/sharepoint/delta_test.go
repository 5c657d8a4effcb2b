package sharepoint_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
)

func TestChangesFromThePresent(t *testing.T) {
	g, a, _ := setup(t)
	ctx := context.Background()
	before := g.Faults.Hits()
	start, err := a.Changes(ctx, live, "")
	if err != nil || start.Next == "" || start.More || len(start.Changed)+len(start.Gone) != 0 {
		t.Fatalf("%+v %v", start, err)
	}
	// Nothing changed: one delta call.
	got := vendortest.FollowChanges(t, a, live, start.Next)
	if len(got.Changed)+len(got.Gone) != 0 || got.Pages != 1 || g.Faults.Hits()-before != 2 {
		t.Fatalf("%+v after %d calls", got, g.Faults.Hits()-before)
	}
	if _, err := a.Changes(ctx, practice.Tenant{Firm: "frm_other"}, ""); !errors.Is(err, practice.ErrNotFound) {
		t.Fatalf("another firm: %v", err)
	}
}

func TestChangesReportAddChangeDeleteMove(t *testing.T) {
	g, a, p := setup(t)
	ctx := context.Background()
	start, err := a.Changes(ctx, live, "")
	if err != nil {
		t.Fatal(err)
	}
	added := g.AddFile("/Clients/Client 03 Ltd/2025/Tax return/SA100 2025.pdf", 7, "application/pdf", epoch.Add(time.Hour))
	touched, deleted, moved := p.IDs[p.Files[0].Path], p.IDs[p.Files[1].Path], p.IDs[p.Files[2].Path]
	g.Touch(touched, epoch.Add(2*time.Hour))
	g.Delete(deleted)
	g.Move(moved, "/Internal", epoch.Add(3*time.Hour))

	got := vendortest.FollowChanges(t, a, live, start.Next)
	if want := ids(added, touched); !slices.Equal(sorted(got.Changed), want) {
		t.Fatalf("changed %v, want %v", sorted(got.Changed), want)
	}
	if want := ids(deleted, moved); !slices.Equal(sorted(got.Gone), want) {
		t.Fatalf("gone %v, want %v", sorted(got.Gone), want)
	}
	// The feed goes on from where it stopped.
	if again := vendortest.FollowChanges(t, a, live, got.Next); len(again.Changed)+len(again.Gone) != 0 {
		t.Fatalf("read twice: %+v", again)
	}
}

func TestChangesFollowARenamedFolder(t *testing.T) {
	g, a, p := setup(t)
	start, err := a.Changes(context.Background(), live, "")
	if err != nil {
		t.Fatal(err)
	}
	// Delta names the folder alone; its documents' paths changed.
	folder := g.Lookup("/Clients/Client 03 Ltd/2024")
	g.Move(folder, "/Clients/Client 04 Ltd", epoch.Add(time.Hour))
	got := vendortest.FollowChanges(t, a, live, start.Next)
	var want []string
	for _, f := range p.Files {
		if strings.HasPrefix(f.Path, "/Clients/Client 03 Ltd/2024/") {
			want = append(want, filing.DocID(p.IDs[f.Path]))
		}
	}
	slices.Sort(want)
	if len(want) == 0 || !slices.Equal(sorted(got.Changed), want) || len(got.Gone) != 0 {
		t.Fatalf("changed %v gone %v, want %v", sorted(got.Changed), got.Gone, want)
	}
	for _, raw := range got.Changed {
		if !strings.Contains(string(raw), `"path":"/Clients/Client 04 Ltd/2024/`) {
			t.Fatalf("old path: %s", raw)
		}
	}
}

func TestChangesInPages(t *testing.T) {
	g, a, _ := setup(t)
	start, err := a.Changes(context.Background(), live, "")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 10 {
		id := g.AddFile(fmt.Sprintf("/Clients/Client 05 Ltd/2025/Other/Note %02d.pdf", i), 1, "application/pdf", epoch)
		want = append(want, filing.DocID(id))
	}
	slices.Sort(want)
	got := vendortest.FollowChanges(t, a, live, start.Next)
	if !slices.Equal(sorted(got.Changed), want) || got.Pages < 3 {
		t.Fatalf("%d pages: %v", got.Pages, sorted(got.Changed))
	}
}

func TestChangesExpired(t *testing.T) {
	g, a, p := setup(t)
	ctx := context.Background()
	start, err := a.Changes(ctx, live, "")
	if err != nil {
		t.Fatal(err)
	}
	g.Touch(p.IDs[p.Files[0].Path], epoch.Add(time.Hour))
	g.ExpireDelta()
	if _, err := a.Changes(ctx, live, start.Next); !errors.Is(err, practice.ErrFeedExpired) || errors.Is(err, practice.ErrNotFound) {
		t.Fatalf("expired token: %v", err)
	}
	if _, err := a.Changes(ctx, live, "https://evil.example/steal"); !errors.Is(err, practice.ErrFeedExpired) {
		t.Fatalf("not a delta link: %v", err)
	}
	restart, err := a.Changes(ctx, live, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := vendortest.FollowChanges(t, a, live, restart.Next); len(got.Changed) != 0 {
		t.Fatalf("after a restart: %+v", got)
	}
}

func TestChangesRefuseARepeatingLink(t *testing.T) {
	g, a, _ := setup(t)
	ctx := context.Background()
	start, err := a.Changes(ctx, live, "")
	if err != nil {
		t.Fatal(err)
	}
	// A next link that names the page just read would be read for ever.
	g.Faults.Queue(vendortest.Fault{Status: http.StatusOK,
		Body: `{"value":[],"@odata.nextLink":"` + strings.TrimSuffix(g.URL, "/v1.0") + "/v1.0" + start.Next + `"}`})
	if p, err := a.Changes(ctx, live, start.Next); !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("a repeating link: %+v %v", p, err)
	}
	g.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"value":[]}`})
	if _, err := a.Changes(ctx, live, start.Next); !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("no link: %v", err)
	}
}

func TestChangesHonourContext(t *testing.T) {
	g, a, _ := setup(t)
	start, err := a.Changes(context.Background(), live, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.Faults.Queue(vendortest.Fault{Delay: time.Minute})
	before := g.Faults.Hits()
	go func() {
		for g.Faults.Hits() == before {
			runtime.Gosched()
		}
		cancel()
	}()
	if _, err := a.Changes(ctx, live, start.Next); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func ids(itemIDs ...string) []string {
	var out []string
	for _, id := range itemIDs {
		out = append(out, filing.DocID(id))
	}
	slices.Sort(out)
	return out
}

func sorted[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
