package notifications_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Notifications(t, func(t *testing.T) (storetest.NotificationLog, storetest.NotificationLog) {
		m := notifications.NewMemory(nil)
		return m, m
	})
}

func TestOnceHandlesABodyOncePerWindow(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	g := notifications.Guard{Log: notifications.NewMemory(func() time.Time { return now })}
	runs := 0
	work := func(context.Context) error { runs++; return nil }
	body := []byte(`{"ResourcePermaKey":"W1","ResourceType":"Work","ActionType":"Updated"}`)

	for i, want := range []bool{false, true, true} {
		if repeat, err := g.Once(ctx, "frm_acme/karbon", body, work); err != nil || repeat != want {
			t.Fatalf("post %d: repeat %v, %v; want %v", i, repeat, err, want)
		}
	}
	if repeat, _ := g.Once(ctx, "frm_birch/karbon", body, work); repeat {
		t.Fatal("the same body for another firm counted as a repeat")
	}
	now = now.Add(notifications.Window)
	if repeat, _ := g.Once(ctx, "frm_acme/karbon", body, work); repeat {
		t.Fatal("a body an hour later counted as a repeat")
	}
	if runs != 3 {
		t.Fatalf("work ran %d times, want 3", runs)
	}

	failed := errors.New("karbon is down")
	other := []byte(`{"ResourcePermaKey":"W2"}`)
	if _, err := g.Once(ctx, "frm_acme/karbon", other, func(context.Context) error { return failed }); !errors.Is(err, failed) {
		t.Fatalf("failed work: %v", err)
	}
	if repeat, err := g.Once(ctx, "frm_acme/karbon", other, work); repeat || err != nil {
		t.Fatalf("the redelivery of a body whose work failed: repeat %v, %v", repeat, err)
	}
}

// downLog is a log whose store does not answer.
type downLog struct{}

func (downLog) ClaimNotification(context.Context, string, time.Duration) (bool, error) {
	return false, errors.New("redis: connection refused")
}
func (downLog) ReleaseNotification(context.Context, string) error { return nil }

func TestOnceHandlesTheBodyWhenTheLogIsDown(t *testing.T) {
	var told error
	g := notifications.Guard{Log: downLog{}, OnLogDown: func(err error) { told = err }}
	ran := false
	repeat, err := g.Once(context.Background(), "s", []byte("b"), func(context.Context) error { ran = true; return nil })
	if repeat || err != nil || !ran || told == nil {
		t.Fatalf("repeat %v, err %v, ran %v, told %v", repeat, err, ran, told)
	}
}

func TestLimitReadsEachRecordOnceUpToTheBound(t *testing.T) {
	items := []string{"a", "b", "a", "c", "a", "d", "b", "e"}
	kept, over := notifications.Limit(items, func(s string) string { return s }, 3)
	if len(kept) != 3 || kept[0] != "a" || kept[1] != "b" || kept[2] != "c" || over != 2 {
		t.Fatalf("kept %v, over %d", kept, over)
	}
}
