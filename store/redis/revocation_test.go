package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/store/credential"
)

// A follower whose position the feed trimmed away is told so, rather than
// skipping what was trimmed.
func TestRevocationFeedReportsTrimmedPosition(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	st := open(t, srv)
	_, pos, err := st.Revocations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, id := range []string{"crd_1", "crd_2", "crd_3"} {
		if err := st.SaveCredential(ctx, &credential.Credential{ID: id, Firm: "frm_a", RevokedAt: &now}); err != nil {
			t.Fatal(err)
		}
	}
	_, first, err := st.RevokedAfter(ctx, pos)
	if err != nil {
		t.Fatal(err)
	}
	rdb := client(t, srv)
	if err := rdb.XTrimMaxLen(ctx, "pgw:cred:revocations", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.RevokedAfter(ctx, pos); !errors.Is(err, credential.ErrFeedGap) {
		t.Fatalf("following from before the trimmed entries: %v, want ErrFeedGap", err)
	}
	if ids, _, err := st.RevokedAfter(ctx, first); err != nil || len(ids) != 0 {
		t.Fatalf("following from the newest entry: %v (%v), want nothing and no gap", ids, err)
	}
}
