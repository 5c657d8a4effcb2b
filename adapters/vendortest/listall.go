package vendortest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/practicegw/practicegw/practice"
)

// ListAll pages through a collection of r with limit and returns every
// item, failing t when a page breaks the paging contract: more items than
// the limit, an id twice, has_more without a cursor or a cursor on the
// last page.
func ListAll(t testing.TB, r practice.Reader, tenant practice.Tenant, k practice.Kind, f practice.Filter, limit int) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	seen := map[string]bool{}
	cursor := ""
	for range 10000 {
		p, err := r.List(context.Background(), tenant, k, practice.Query{Filter: f, Cursor: cursor, Limit: limit})
		if err != nil {
			t.Fatalf("list %s: %v", k, err)
		}
		if len(p.Items) > limit {
			t.Fatalf("list %s: %d items over the limit %d", k, len(p.Items), limit)
		}
		for _, raw := range p.Items {
			var v struct{ ID string }
			if err := json.Unmarshal(raw, &v); err != nil || v.ID == "" {
				t.Fatalf("list %s: item without an id: %s", k, raw)
			}
			if seen[v.ID] {
				t.Fatalf("list %s: %s twice", k, v.ID)
			}
			seen[v.ID] = true
			out = append(out, raw)
		}
		if p.HasMore == (p.Next == "") {
			t.Fatalf("list %s: has_more %v with next %q", k, p.HasMore, p.Next)
		}
		if !p.HasMore {
			return out
		}
		cursor = p.Next
	}
	t.Fatalf("list %s: paging never ended", k)
	return nil
}
