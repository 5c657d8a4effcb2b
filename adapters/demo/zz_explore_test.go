package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/adapters"
)

func TestExplore(t *testing.T) {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "x.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	r, err := Open(db, []string{"frm_acme", "frm_birch"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("open: %v", time.Since(start))
	start = time.Now()
	r2, err := Open(db, []string{"frm_acme", "frm_birch"})
	t.Logf("reopen: %v %v", time.Since(start), err)
	_ = r2
	for _, firm := range []string{"frm_acme", "frm_birch"} {
		for _, k := range adapters.Kinds {
			p, err := r.List(context.Background(), adapters.Tenant{Firm: firm}, k, adapters.Query{Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range p.Items {
				fmt.Println(string(it))
			}
		}
	}
}
