package dropbox_test

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

	"github.com/practicegw/practicegw/adapters/dropbox"
	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
)

func start(t *testing.T, a *dropbox.Adapter) string {
	t.Helper()
	p, err := a.Changes(context.Background(), live, "")
	if err != nil || p.Next == "" || p.More || len(p.Changed)+len(p.Gone) != 0 {
		t.Fatalf("%+v %v", p, err)
	}
	return p.Next
}

func TestChangesFromThePresent(t *testing.T) {
	d, a, _, _ := setup(t)
	before := d.Faults.Hits()
	got := vendortest.FollowChanges(t, a, live, start(t, a))
	// Nothing changed: one list_folder/continue.
	if len(got.Changed)+len(got.Gone) != 0 || got.Pages != 1 || d.Faults.Hits()-before != 2 {
		t.Fatalf("%+v after %d calls", got, d.Faults.Hits()-before)
	}
	if _, err := a.Changes(context.Background(), practice.Tenant{Firm: "frm_other"}, ""); !errors.Is(err, practice.ErrNotFound) {
		t.Fatalf("another firm: %v", err)
	}
}

func TestChangesReportAddChangeDeleteMove(t *testing.T) {
	d, a, p, _ := setup(t)
	from := start(t, a)
	added := d.AddFile("/Clients/Client 03 Ltd/2025/Tax return/SA100 2025.pdf", 7, epoch.Add(time.Hour))
	touched, deleted, moved, within := p.IDs[p.Files[0].Path], p.IDs[p.Files[1].Path], p.IDs[p.Files[2].Path], p.IDs[p.Files[3].Path]
	d.Touch(touched, epoch.Add(2*time.Hour))
	d.Delete(deleted)
	d.Move(moved, "/Internal", epoch.Add(3*time.Hour))
	// Dropbox names the old path deleted: the file is not gone.
	d.Move(within, "/Clients/Client 03 Ltd/2024/Source documents", epoch.Add(4*time.Hour))

	got := vendortest.FollowChanges(t, a, live, from)
	if want := ids(added, touched, within); !slices.Equal(sorted(got.Changed), want) {
		t.Fatalf("changed %v, want %v", sorted(got.Changed), want)
	}
	if want := ids(deleted, moved); !slices.Equal(sorted(got.Gone), want) {
		t.Fatalf("gone %v, want %v", sorted(got.Gone), want)
	}
	if !strings.Contains(string(got.Changed[filing.DocID(within)]), `"path":"/Clients/Client 03 Ltd/2024/Source documents/"`) {
		t.Fatalf("moved within: %s", got.Changed[filing.DocID(within)])
	}
	if again := vendortest.FollowChanges(t, a, live, got.Next); len(again.Changed)+len(again.Gone) != 0 {
		t.Fatalf("read twice: %+v", again)
	}
}

func TestChangesFollowAMovedFolder(t *testing.T) {
	d, a, _, _ := setup(t)
	ctx := context.Background()
	from := start(t, a)
	// Into the root: Dropbox names every file below it.
	d.Move(d.Lookup("/Internal"), "/Clients/Client 09 Ltd", epoch.Add(time.Hour))
	got := vendortest.FollowChanges(t, a, live, from)
	if len(got.Changed) != 1 || len(got.Gone) != 0 {
		t.Fatalf("%+v", got)
	}
	// Out of the root: Dropbox names the folder's old path alone.
	d.Move(d.Lookup("/Clients/Client 00 Ltd"), "/Archive", epoch.Add(2*time.Hour))
	if _, err := a.Changes(ctx, live, got.Next); !errors.Is(err, practice.ErrFeedExpired) {
		t.Fatalf("a folder moved out: %v", err)
	}
}

func TestChangesInPages(t *testing.T) {
	d, a, _, _ := setup(t)
	from := start(t, a)
	var want []string
	for i := range 10 {
		want = append(want, filing.DocID(d.AddFile(fmt.Sprintf("/Clients/Client 05 Ltd/2025/Other/Note %02d.pdf", i), 1, epoch)))
	}
	slices.Sort(want)
	got := vendortest.FollowChanges(t, a, live, from)
	if !slices.Equal(sorted(got.Changed), want) || got.Pages < 2 {
		t.Fatalf("%d pages: %v", got.Pages, sorted(got.Changed))
	}
}

func TestChangesExpired(t *testing.T) {
	d, a, p, _ := setup(t)
	ctx := context.Background()
	from := start(t, a)
	d.Touch(p.IDs[p.Files[0].Path], epoch.Add(time.Hour))
	d.ExpireCursors()
	if _, err := a.Changes(ctx, live, from); !errors.Is(err, practice.ErrFeedExpired) || errors.Is(err, practice.ErrConflict) {
		t.Fatalf("reset cursor: %v", err)
	}
	if got := vendortest.FollowChanges(t, a, live, start(t, a)); len(got.Changed) != 0 {
		t.Fatalf("after a restart: %+v", got)
	}
}

func TestChangesRefuseARepeatingCursor(t *testing.T) {
	d, a, _, _ := setup(t)
	ctx := context.Background()
	from := start(t, a)
	d.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"entries":[],"cursor":"` + from + `","has_more":true}`})
	if p, err := a.Changes(ctx, live, from); !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("a repeating cursor: %+v %v", p, err)
	}
	d.Faults.Queue(vendortest.Fault{Status: http.StatusOK, Body: `{"entries":[],"has_more":false}`})
	if _, err := a.Changes(ctx, live, from); !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("no cursor: %v", err)
	}
}

func TestChangesHonourContext(t *testing.T) {
	d, a, _, _ := setup(t)
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
