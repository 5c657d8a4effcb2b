package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/practicegw/practicegw/store/usage"
)

// UsageStore is where the rate limiter keeps each credential's hourly
// counts (ratelimit.UsageStore).
type UsageStore interface {
	AddUsage(ctx context.Context, credentialID string, hour time.Time, admitted, refused int64) error
	Usage(ctx context.Context, credentialID string, since time.Time) ([]usage.Hour, error)
}

// OpenUsage returns two clients of one empty usage backend, as two
// gateway instances (or a restarted one) would hold.
type OpenUsage func(t *testing.T) (a, b UsageStore)

// Usage checks a UsageStore: counts add up per credential and hour
// whichever client wrote them, come back oldest first from the hour that
// holds since, and credentials do not share them.
func Usage(t *testing.T, open OpenUsage) {
	ctx := context.Background()
	// Recent hours: a store may drop what is past usage.Retention.
	h0 := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	hour := func(i int) time.Time { return h0.Add(time.Duration(i) * time.Hour) }
	add := func(t *testing.T, s UsageStore, id string, h time.Time, a, r int64) {
		t.Helper()
		if err := s.AddUsage(ctx, id, h, a, r); err != nil {
			t.Fatal(err)
		}
	}
	read := func(t *testing.T, s UsageStore, id string, since time.Time) []usage.Hour {
		t.Helper()
		got, err := s.Usage(ctx, id, since)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	t.Run("CountsAddUpAcrossClients", func(t *testing.T) {
		a, b := open(t)
		add(t, a, "crd_a", hour(0), 3, 1)
		add(t, b, "crd_a", hour(0), 2, 0)
		add(t, a, "crd_a", hour(2), 0, 4)
		add(t, b, "crd_b", hour(1), 9, 9)
		want := []usage.Hour{{Hour: hour(0), Admitted: 5, Refused: 1}, {Hour: hour(2), Refused: 4}}
		for _, s := range []UsageStore{a, b} {
			if got := read(t, s, "crd_a", hour(0)); !slices.Equal(got, want) {
				t.Fatalf("usage %+v, want %+v", got, want)
			}
		}
		if got := read(t, a, "crd_b", hour(0)); !slices.Equal(got, []usage.Hour{{Hour: hour(1), Admitted: 9, Refused: 9}}) {
			t.Fatalf("crd_b's usage %+v, want its own hour only", got)
		}
	})

	t.Run("SinceTheHourHoldingIt", func(t *testing.T) {
		a, _ := open(t)
		for i := range 4 {
			add(t, a, "crd_a", hour(i), int64(i+1), 0)
		}
		got := read(t, a, "crd_a", hour(2).Add(59*time.Minute))
		want := []usage.Hour{{Hour: hour(2), Admitted: 3}, {Hour: hour(3), Admitted: 4}}
		if !slices.Equal(got, want) {
			t.Fatalf("usage since 59 minutes into hour 2: %+v, want hours 2 and 3", got)
		}
		if got := read(t, a, "crd_a", hour(4)); len(got) != 0 {
			t.Fatalf("usage since after the last count: %+v, want none", got)
		}
	})

	t.Run("AnHourIsUTC", func(t *testing.T) {
		a, _ := open(t)
		zone := time.FixedZone("UTC+5:30", 5*3600+1800)
		add(t, a, "crd_a", hour(1).In(zone), 1, 0)
		got := read(t, a, "crd_a", hour(0))
		if len(got) != 1 || !got[0].Hour.Equal(hour(1)) || got[0].Hour.Location() != time.UTC {
			t.Fatalf("usage %+v, want one hour at %v UTC", got, hour(1))
		}
	})

	t.Run("UnknownCredential", func(t *testing.T) {
		a, _ := open(t)
		if got := read(t, a, "crd_none", hour(0)); len(got) != 0 {
			t.Fatalf("usage %+v for a credential never counted", got)
		}
	})
}
