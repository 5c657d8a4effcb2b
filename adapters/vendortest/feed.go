package vendortest

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/practicegw/practicegw/practice"
)

// ChangeFeed is a document store adapter with its vendor's change feed.
type ChangeFeed interface {
	practice.Reader
	Changes(ctx context.Context, t practice.Tenant, cursor string) (practice.ChangesPage, error)
}

// Followed is what FollowChanges read: the last word on each document,
// changed (its /v1 JSON) or gone, the position to go on from and how many
// pages it took.
type Followed struct {
	Changed map[string]json.RawMessage
	Gone    map[string]bool
	Next    string
	Pages   int
}

// FollowChanges reads f from cursor until the vendor has no more changes
// right away. It fails t when a page breaks the feed's contract: no Next,
// a document both changed and gone, or a changed document that is not
// what Get returns for it.
func FollowChanges(t testing.TB, f ChangeFeed, tenant practice.Tenant, cursor string) Followed {
	t.Helper()
	out := Followed{Changed: map[string]json.RawMessage{}, Gone: map[string]bool{}}
	for range 1000 {
		p, err := f.Changes(context.Background(), tenant, cursor)
		if err != nil {
			t.Fatalf("changes after %q: %v", cursor, err)
		}
		out.Pages++
		if p.Next == "" {
			t.Fatalf("changes after %q: no next position", cursor)
		}
		page := map[string]bool{}
		for _, raw := range p.Changed {
			var d practice.Document
			if err := json.Unmarshal(raw, &d); err != nil || d.ID == "" {
				t.Fatalf("changes: a document without an id: %s", raw)
			}
			got, err := f.Get(context.Background(), tenant, practice.Documents, d.ID)
			if err != nil || !bytes.Equal(got, raw) {
				t.Fatalf("changes: %s\nGet: %s (%v)", raw, got, err)
			}
			page[d.ID] = true
			out.Changed[d.ID] = raw
			delete(out.Gone, d.ID)
		}
		for _, id := range p.Gone {
			if page[id] {
				t.Fatalf("changes: %s both changed and gone", id)
			}
			out.Gone[id] = true
			delete(out.Changed, id)
		}
		out.Next = p.Next
		if !p.More {
			return out
		}
		cursor = p.Next
	}
	t.Fatal("changes: the feed never caught up")
	return out
}
