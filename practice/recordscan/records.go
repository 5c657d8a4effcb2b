package recordscan

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/practicegw/practicegw/practice"
)

// Records lists every record of each kind r serves for tenant, page by
// page, scanning each record as listed and as read alone; t fails for
// each problem, naming the record. It returns how many records of each
// kind it scanned, for the test to check it scanned what it meant to.
func Records(t testing.TB, r practice.Reader, tenant practice.Tenant, nullable Nullable, kinds ...practice.Kind) map[practice.Kind]int {
	t.Helper()
	ctx := context.Background()
	counts := map[practice.Kind]int{}
	for _, k := range kinds {
		q := practice.Query{Limit: 50}
		for pages := 0; ; pages++ {
			if pages == 10_000 {
				t.Fatalf("%s: paging never ended", k)
			}
			p, err := r.List(ctx, tenant, k, q)
			if err != nil {
				t.Fatalf("list %s: %v", k, err)
			}
			for _, raw := range p.Items {
				counts[k]++
				for _, prob := range Scan(raw, nullable) {
					t.Errorf("%s listed: %s\n%s", k, prob, raw)
				}
				var rec struct {
					ID string `json:"id"`
				}
				if err := json.Unmarshal(raw, &rec); err != nil || rec.ID == "" {
					t.Errorf("%s listed a record without an id: %s", k, raw)
					continue
				}
				one, err := r.Get(ctx, tenant, k, rec.ID)
				if err != nil {
					t.Errorf("read %s %s: %v", k, rec.ID, err)
					continue
				}
				for _, prob := range Scan(one, nullable) {
					t.Errorf("%s %s read: %s\n%s", k, rec.ID, prob, one)
				}
			}
			if !p.HasMore {
				break
			}
			q.Cursor = p.Next
		}
	}
	return counts
}

// Want fails t unless counts holds at least min records of each kind.
func Want(t testing.TB, counts map[practice.Kind]int, min map[practice.Kind]int) {
	t.Helper()
	for k, n := range min {
		if counts[k] < n {
			t.Errorf("scanned %d %s, want at least %d", counts[k], k, n)
		}
	}
	if t.Failed() {
		t.Log(fmt.Sprint("scanned ", counts))
	}
}
