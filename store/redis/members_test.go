package redis_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// The membership: a heartbeat makes an instance a member with what it
// holds, one that stops renewing drops out when its heartbeat lapses (by
// Redis's clock), and one that leaves is gone at once.
func TestMembershipHeartbeatsLapseAndLeave(t *testing.T) {
	srv := redistest.Start(t)
	rm := open(t, srv).ReadModel()
	ctx := context.Background()
	ids := func() []string {
		ms, err := rm.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		slices.Sort(out)
		return out
	}
	a := readmodel.Member{ID: "gw-a", Advertise: "http://10.0.0.1:8080", Memory: 512 << 20,
		Holds: []string{"frm_a"}, Sizes: map[string]int64{"frm_a": 123_456_789}}
	if err := rm.Heartbeat(ctx, a, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := rm.Heartbeat(ctx, readmodel.Member{ID: "gw-b", Advertise: "http://10.0.0.2:8080"}, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := rm.Heartbeat(ctx, readmodel.Member{ID: "gw-c", Advertise: "http://10.0.0.3:8080"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	ms, err := rm.Members(ctx)
	if err != nil || len(ms) != 3 {
		t.Fatalf("members %+v, %v", ms, err)
	}
	for _, m := range ms {
		if m.ID == "gw-a" && (m.Advertise != a.Advertise || m.Memory != a.Memory || !slices.Equal(m.Holds, a.Holds) ||
			m.Sizes["frm_a"] != 123_456_789 || m.Until == 0) {
			t.Fatalf("gw-a read back as %+v", m)
		}
	}
	if err := rm.Leave(ctx, "gw-c"); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 5*time.Second, 20*time.Millisecond, "gw-b's heartbeat to lapse", func() bool {
		return slices.Equal(ids(), []string{"gw-a"})
	})
	// A renewed heartbeat says what it holds now.
	a.Holds = []string{"frm_a", "frm_b"}
	if err := rm.Heartbeat(ctx, a, time.Minute); err != nil {
		t.Fatal(err)
	}
	ms, _ = rm.Members(ctx)
	if len(ms) != 1 || !slices.Equal(ms[0].Holds, a.Holds) {
		t.Fatalf("after a renewal: %+v", ms)
	}
}
