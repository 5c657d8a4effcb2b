package bolt_test

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
	boltstore "github.com/practicegw/practicegw/store/bolt"
)

// A file from the version whose feed numbered every tenant's events in one
// bucket opens: that bucket goes, its positions are refused as unknown
// rather than followed, and the tenant's own positions start afresh.
func TestTheSharedFeedOfTheVersionBeforeGoes(t *testing.T) {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "old.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("dispatch_event_feed"))
		if err != nil {
			return err
		}
		if err := b.SetSequence(4711); err != nil {
			return err
		}
		return b.Put(binary.BigEndian.AppendUint64(nil, 4711), []byte("frm_acme\x00live\x00evt_old"))
	}); err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.New(db, nil, boltstore.WithSecrets(secrets))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("dispatch_event_feed")) != nil {
			return errors.New("the previous version's feed bucket is still there")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	acme := practice.Tenant{Firm: "frm_acme"}
	if _, err := st.Feed(ctx, dispatcher.FeedQuery{Tenant: acme, After: "4711"}); !errors.Is(err, practice.ErrInvalidCursor) {
		t.Fatalf("a position of the previous version: %v, want ErrInvalidCursor", err)
	}
	at := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	ev := dispatcher.Event{ID: dispatcher.EventID("chg_1", dispatcher.ClientCreated, at), Event: dispatcher.ClientCreated,
		OccurredAt: at, Firm: acme.Firm, Data: []byte(`{}`)}
	if _, err := st.Record(ctx, []dispatcher.Event{ev}); err != nil {
		t.Fatal(err)
	}
	page, err := st.Feed(ctx, dispatcher.FeedQuery{Tenant: acme, After: "0"})
	if err != nil || page.Missed || len(page.Entries) != 1 || page.Entries[0].Position != "1" {
		t.Fatalf("the tenant's first event: %+v, %v; want it at position 1", page, err)
	}
}
