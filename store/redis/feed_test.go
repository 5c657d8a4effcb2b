package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/practice"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// The version before numbered a tenant's positions by time, in a stream
// of its own: those positions are refused as unknown rather than followed,
// and that stream goes with the tenant's first event under the new one.
func TestTheTimeNumberedFeedOfTheVersionBeforeGoes(t *testing.T) {
	srv := redistest.Start(t)
	st := open(t, srv)
	opts, _ := goredis.ParseURL(srv.URL())
	rdb := goredis.NewClient(opts)
	defer rdb.Close()
	ctx := context.Background()
	old := redisstore.DefaultPrefix + "feed:frm_acme:live"
	oldID, err := rdb.XAdd(ctx, &goredis.XAddArgs{Stream: old, Values: []string{"id", "evt_old"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	acme := practice.Tenant{Firm: "frm_acme"}
	if _, err := st.Feed(ctx, dispatcher.FeedQuery{Tenant: acme, After: oldID}); !errors.Is(err, practice.ErrInvalidCursor) {
		t.Fatalf("a position of the previous version: %v, want ErrInvalidCursor", err)
	}
	at := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	ev := dispatcher.Event{ID: dispatcher.EventID("chg_1", dispatcher.ClientCreated, at), Event: dispatcher.ClientCreated,
		OccurredAt: at, Firm: acme.Firm, Data: []byte(`{}`)}
	if _, err := st.Record(ctx, []dispatcher.Event{ev}); err != nil {
		t.Fatal(err)
	}
	page, err := st.Feed(ctx, dispatcher.FeedQuery{Tenant: acme, After: "0-0"})
	if err != nil || page.Missed || len(page.Entries) != 1 || page.Entries[0].Event.ID != ev.ID {
		t.Fatalf("the tenant's first event: %+v, %v", page, err)
	}
	if n, err := rdb.Exists(ctx, old).Result(); err != nil || n != 0 {
		t.Fatalf("the previous version's stream is still there (%d, %v)", n, err)
	}
}
