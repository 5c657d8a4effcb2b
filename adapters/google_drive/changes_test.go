package googledrive_test

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

	"github.com/practicegw/practicegw/adapters/google_drive"
	"github.com/practicegw/practicegw/adapters/kit/docstore"
	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
)

// scoped files the practice in a Drive and serves its Clients folder.
func scoped(t *testing.T) (*vendortest.GDrive, *googledrive.Adapter, vendortest.Practice) {
	t.Helper()
	d := vendortest.NewGDrive()
	t.Cleanup(d.Close)
	p := vendortest.FilePractice(epoch, d.AddFile)
	cfg := googledrive.Config{Firm: "frm_acme", BaseURL: d.URL, PageSize: 4, RootFolderID: d.Lookup("/Clients"), RootPath: "/Clients",
		OAuth2: upstream.OAuth2Config{AccessToken: d.Token}, MaxScanPages: 60,
		Upstream: upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second), MaxAttempts: 1}}
	a, err := googledrive.New(cfg, upstream.Deps{}, docstore.WithClientLinker(p.Clients))
	if err != nil {
		t.Fatal(err)
	}
	return d, a, p
}

func start(t *testing.T, a *googledrive.Adapter) string {
	t.Helper()
	p, err := a.Changes(context.Background(), live, "")
	if err != nil || p.Next == "" || p.More || len(p.Changed)+len(p.Gone) != 0 {
		t.Fatalf("%+v %v", p, err)
	}
	return p.Next
}

func TestChangesFromThePresent(t *testing.T) {
	d, a, _ := scoped(t)
	before := d.Faults.Hits()
	got := vendortest.FollowChanges(t, a, live, start(t, a))
	// Nothing changed: one changes.list.
	if len(got.Changed)+len(got.Gone) != 0 || got.Pages != 1 || d.Faults.Hits()-before != 2 {
		t.Fatalf("%+v after %d calls", got, d.Faults.Hits()-before)
	}
	if _, err := a.Changes(context.Background(), practice.Tenant{Firm: "frm_acme", Sandbox: true}, ""); !errors.Is(err, practice.ErrNotFound) {
		t.Fatalf("sandbox: %v", err)
	}
}

func TestChangesReportAddChangeDeleteMove(t *testing.T) {
	d, a, p := scoped(t)
	from := start(t, a)
	added := d.AddFile("/Clients/Client 03 Ltd/2025/Tax return/SA100 2025.pdf", 7, "application/pdf", epoch.Add(time.Hour))
	touched, deleted, trashed, moved := p.IDs[p.Files[0].Path], p.IDs[p.Files[1].Path], p.IDs[p.Files[2].Path], p.IDs[p.Files[3].Path]
	d.Touch(touched, epoch.Add(2*time.Hour))
	d.Delete(deleted)
	d.Trash(trashed)
	d.Move(moved, "/Internal", epoch.Add(3*time.Hour))

	got := vendortest.FollowChanges(t, a, live, from)
	if want := ids(added, touched); !slices.Equal(sorted(got.Changed), want) {
		t.Fatalf("changed %v, want %v", sorted(got.Changed), want)
	}
	if want := ids(deleted, trashed, moved); !slices.Equal(sorted(got.Gone), want) {
		t.Fatalf("gone %v, want %v", sorted(got.Gone), want)
	}
	if again := vendortest.FollowChanges(t, a, live, got.Next); len(again.Changed)+len(again.Gone) != 0 {
		t.Fatalf("read twice: %+v", again)
	}
}

func TestChangesFollowARenamedFolder(t *testing.T) {
	d, a, p := scoped(t)
	// Listed first, so the adapter knows the folder where it was.
	vendortest.ListAll(t, a, live, practice.Documents, practice.Filter{}, 50)
	from := start(t, a)
	d.Move(d.Lookup("/Clients/Client 03 Ltd/2024"), "/Clients/Client 04 Ltd", epoch.Add(time.Hour))
	got := vendortest.FollowChanges(t, a, live, from)
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
	d, a, _ := scoped(t)
	from := start(t, a)
	var want []string
	for i := range 10 {
		want = append(want, filing.DocID(d.AddFile(fmt.Sprintf("/Clients/Client 05 Ltd/2025/Other/Note %02d.pdf", i), 1, "application/pdf", epoch)))
	}
	slices.Sort(want)
	got := vendortest.FollowChanges(t, a, live, from)
	if !slices.Equal(sorted(got.Changed), want) || got.Pages < 3 {
		t.Fatalf("%d pages: %v", got.Pages, sorted(got.Changed))
	}
}

func TestChangesExpired(t *testing.T) {
	d, a, p := scoped(t)
	ctx := context.Background()
	from := start(t, a)
	d.Touch(p.IDs[p.Files[0].Path], epoch.Add(time.Hour))
	d.ExpireChanges()
	if _, err := a.Changes(ctx, live, from); !errors.Is(err, practice.ErrFeedExpired) {
		t.Fatalf("expired token: %v", err)
	}
	if got := vendortest.FollowChanges(t, a, live, start(t, a)); len(got.Changed) != 0 {
		t.Fatalf("after a restart: %+v", got)
	}
	// Another 400 is no expired token.
	d.Faults.Queue(vendortest.Fault{Status: http.StatusBadRequest,
		Body: `{"error":{"code":400,"message":"Invalid Value","errors":[{"reason":"invalid","location":"pageSize"}]}}`})
	if _, err := a.Changes(ctx, live, from); err == nil || errors.Is(err, practice.ErrFeedExpired) {
		t.Fatalf("a bad page size: %v", err)
	}
}

func TestChangesRefuseARepeatingToken(t *testing.T) {
	d, a, _ := scoped(t)
	ctx := context.Background()
	from := start(t, a)
	d.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"changes":[],"nextPageToken":"` + from + `"}`})
	if p, err := a.Changes(ctx, live, from); !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("a repeating token: %+v %v", p, err)
	}
	d.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"changes":[]}`})
	if _, err := a.Changes(ctx, live, from); !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("no token: %v", err)
	}
}

func TestChangesHonourContext(t *testing.T) {
	d, a, _ := scoped(t)
	from := start(t, a)
	ctx, cancel := context.WithCancel(context.Background())
	d.Faults.Queue(vendortest.Fault{Delay: time.Minute})
	before := d.Faults.Hits()
	go func() {
		for d.Faults.Hits() == before {
			runtime.Gosched()
		}
		cancel()
	}()
	if _, err := a.Changes(ctx, live, from); !errors.Is(err, context.Canceled) {
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
