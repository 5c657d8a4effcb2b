package firms

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/internal/testclock"
	"github.com/practicegw/practicegw/practice"
)

// budgetedRecords is a records system whose every link is one call
// through its upstream client, under its vendor's budget.
type budgetedRecords struct{ c *upstream.Client }

func (r budgetedRecords) List(context.Context, practice.Tenant, practice.Kind, practice.Query) (practice.Page, error) {
	return practice.Page{}, nil
}

func (r budgetedRecords) Get(context.Context, practice.Tenant, practice.Kind, string) (json.RawMessage, error) {
	return nil, practice.ErrNotFound
}

func (r budgetedRecords) LinkClient(ctx context.Context, _ practice.Tenant, c linking.Candidate) (linking.Link, error) {
	if _, err := r.c.Do(ctx, upstream.Request{Path: "/clients"}); err != nil {
		return linking.Link{}, err
	}
	return linking.Link{Client: "cli_" + c.Ref, Outcome: linking.Linked}, nil
}

// A ledger's first read asks the firm's records system for a link without
// queueing behind the records system's own sync for its allowance: with
// the allowance spent, the link is left for later at once, unsent and not
// counted; any other read of the ledger waits its turn and is linked.
func TestAFirstReadLeavesALinkForLaterWhenTheRecordsBudgetIsSpent(t *testing.T) {
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		sent.Add(1)
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	clock := testclock.New(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
	// Karbon's 120 a minute, spent whole (the records system's sync, its
	// notifications' reads, its clients' requests): its burst is gone.
	c, err := upstream.NewClient(upstream.Options{System: "karbon", BaseURL: srv.URL,
		Policy: upstream.Policy{RateLimit: 120, RatePeriod: upstream.Duration(time.Minute)}}, upstream.Deps{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	sync := practice.GivingWay(context.Background())
	for clock.Slept() == nil {
		if _, err := c.Do(context.Background(), upstream.Request{Path: "/contacts"}); err != nil {
			t.Fatal(err)
		}
	}
	f := &firm{}
	tb := newTable()
	tb.kinds = map[practice.Kind]source{practice.Clients: {sys: &system{label: "Karbon",
		opened: firmsystem.Opened{Label: "Karbon", Reader: budgetedRecords{c}}}}}
	f.table.Store(tb)
	tally := &linking.Tally{}
	linker := f.linkerFor("ledger", tally)

	before, slept := sent.Load(), len(clock.Slept())
	first, later := practice.LinksLater(sync)
	l, err := linker.LinkClient(first, practice.Tenant{}, linking.Candidate{Ref: "xc-1", External: "xc-1", Name: "Ann"})
	if err != nil || l.Outcome != linking.Later || l.Ref() != nil || later.Left() != 1 {
		t.Fatalf("a first read's link with the allowance spent: %+v, %v, %d left", l, err, later.Left())
	}
	if sent.Load() != before || len(clock.Slept()) != slept || tally.Counts().Candidates != 0 {
		t.Fatalf("left for later, yet %d calls sent, slept %v, tallied %+v", sent.Load()-before, clock.Slept()[slept:], tally.Counts())
	}

	l, err = linker.LinkClient(sync, practice.Tenant{}, linking.Candidate{Ref: "xc-1", External: "xc-1", Name: "Ann"})
	if err != nil || l.Outcome != linking.Linked || l.Client != "cli_xc-1" || sent.Load() != before+1 || len(clock.Slept()) == slept {
		t.Fatalf("the reconciliation's link: %+v, %v; %d sent, slept %v", l, err, sent.Load()-before, clock.Slept()[slept:])
	}
	if c := tally.Counts(); c.Candidates != 1 || c.Linked != 1 {
		t.Fatalf("tally %+v, want the one candidate linked", c)
	}
}

// A records system found at the start reconciles only the systems that
// counted unlinked records in this process; one connected later also
// those that have counted nothing yet (their copy loaded, or their sync
// held elsewhere), so a restart reads no ledger in full to link it again.
func TestARestartReconcilesOnlyWhatItCountedUnlinked(t *testing.T) {
	none, linked, unlinked := &linking.Tally{}, &linking.Tally{}, &linking.Tally{}
	linked.Note("xc-1", linking.Linked)
	unlinked.Note("xc-1", linking.Linked)
	unlinked.Note("xc-2", linking.Missing)
	for _, c := range []struct {
		name    string
		tally   *linking.Tally
		started bool
		want    bool
	}{
		{"no tally (a records system)", nil, false, false},
		{"nothing counted, records connected", none, false, true},
		{"nothing counted, records found at the start", none, true, false},
		{"all linked", linked, false, false},
		{"all linked, at the start", linked, true, false},
		{"one unlinked", unlinked, false, true},
		{"one unlinked, at the start", unlinked, true, true},
	} {
		if got := mayLink(c.tally, c.started); got != c.want {
			t.Errorf("%s: reconciled %v, want %v", c.name, got, c.want)
		}
	}
}
