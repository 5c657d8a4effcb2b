package readmodel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

var holdTenant = practice.Tenant{Firm: "frm_hold"}

func heldJob(i, v int) readmodel.Update {
	id := fmt.Sprintf("job_%05d", i)
	raw := fmt.Sprintf(`{"id":%q,"object":"job","title":"Accounts %d for the year ended 31 March","client":"cli_%04d","owner":"usr_%02d",`+
		`"status":"in_progress","stage":"in_review","deadline":"2026-06-30","version":%d,"updated_at":"2026-03-02T09:00:%02d.000Z",`+
		`"description":"Year-end accounts and corporation tax return, with the directors' loan account reconciled"}`, id, i, i%500, i%20, v, i%60)
	return readmodel.Update{Kind: practice.Jobs, ID: id, Raw: json.RawMessage(raw)}
}

func sharedModel(store *readmodelsim.Store) *readmodel.Model {
	m := readmodel.New(readmodel.Config{Firm: holdTenant.Firm, Store: store, Updates: store})
	m.Serve(practice.Jobs, nil)
	return m
}

// A model unloaded (its firm held elsewhere) answers what a loaded one
// does: its next read loads the firm from the shared store, with what
// others wrote meanwhile; and a read racing an Unload never answers from
// the emptied copy.
func TestUnloadedModelAnswersFromTheStore(t *testing.T) {
	ctx := context.Background()
	store := readmodelsim.NewStore(time.Now)
	writer, reader := sharedModel(store), sharedModel(store)
	var us []readmodel.Update
	for i := range 300 {
		us = append(us, heldJob(i, 1))
	}
	if err := writer.Apply(ctx, us); err != nil {
		t.Fatal(err)
	}
	reader.MarkUnloaded()
	if reader.Loaded() {
		t.Fatal("marked unloaded, says loaded")
	}
	page, err := reader.List(ctx, holdTenant, practice.Jobs, practice.Query{Limit: 200})
	if err != nil || len(page.Items) != 200 || !reader.Loaded() {
		t.Fatalf("first read of an unloaded model: %d items, loaded %v, %v", len(page.Items), reader.Loaded(), err)
	}
	reader.Unload()
	if s := reader.Size(); s.Records != 0 || s.Bytes != 0 {
		t.Fatalf("unloaded, it still holds %+v", s)
	}
	if err := writer.Apply(ctx, []readmodel.Update{heldJob(7, 2)}); err != nil {
		t.Fatal(err)
	}
	raw, err := reader.Get(ctx, holdTenant, practice.Jobs, "job_00007")
	if err != nil || !json.Valid(raw) || string(raw) != string(heldJob(7, 2).Raw) {
		t.Fatalf("job_00007 after unload and another's write: %s, %v", raw, err)
	}
	// Reads racing unloads: every answer is whole.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				reader.Unload()
				runtime.Gosched()
			}
		}
	}()
	for i := range 200 {
		page, err := reader.List(ctx, holdTenant, practice.Jobs, practice.Query{Limit: 50})
		if err != nil || len(page.Items) != 50 {
			close(stop)
			wg.Wait()
			t.Fatalf("read %d racing unloads: %d items, %v", i, len(page.Items), err)
		}
		last, err := reader.Last(ctx, changes.StateKey(holdTenant, practice.Jobs, "job_00007"))
		if err != nil || string(last) != string(heldJob(7, 2).Raw) {
			close(stop)
			wg.Wait()
			t.Fatalf("state %d racing unloads: %s, %v", i, last, err)
		}
	}
	close(stop)
	wg.Wait()
}

// Size counts what the records take on the Go heap, within a tenth or
// so: the bound an operator sets is the memory the read models take. A
// kind's posting lists cost most where each value has few records (a
// firm's clients have a few jobs each), so both shapes are measured.
func TestSizeCountsTheHeap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		clients int
	}{
		{"40 jobs a client", 500},
		{"2 or 3 jobs a client", 8_500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := readmodelsim.NewStore(time.Now)
			var us []readmodel.Update
			for i := range 20_000 {
				u := heldJob(i, 1)
				u.Raw = json.RawMessage(strings.Replace(string(u.Raw), fmt.Sprintf(`"cli_%04d"`, i%500), fmt.Sprintf(`"cli_%04d"`, i%tc.clients), 1))
				us = append(us, u)
			}
			if err := store.Apply(ctx, holdTenant.Firm, us); err != nil {
				t.Fatal(err)
			}
			us = nil
			heap := func() uint64 {
				runtime.GC()
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				return ms.HeapAlloc
			}
			m := sharedModel(store)
			m.MarkUnloaded()
			before := heap()
			if err := m.CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
			used := int64(heap() - before)
			size := m.Size()
			if size.Records != 20_000 {
				t.Fatalf("%d records held", size.Records)
			}
			ratio := float64(size.Bytes) / float64(used)
			t.Logf("Size %d bytes, heap %d bytes (%.0f a record): %.2f", size.Bytes, used, float64(used)/20_000, ratio)
			if ratio < 0.9 || ratio > 1.15 {
				t.Fatalf("Size says %d bytes, the heap grew %d: off by more than a tenth", size.Bytes, used)
			}
			runtime.KeepAlive(m)
		})
	}
}
