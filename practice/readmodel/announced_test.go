package readmodel_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

// readingStore is a store at which, while the state of a change already
// published is being stored, a receiver of the change reads the record
// and its kind's list, as one that heard the webhook would.
type readingStore struct {
	*readmodelsim.Store
	during atomic.Pointer[func()]
}

func (s *readingStore) Apply(ctx context.Context, firm string, us []readmodel.Update) error {
	if during := s.during.Swap(nil); during != nil {
		(*during)()
	}
	return s.Store.Apply(ctx, firm, us)
}

// A change record is published before its state is stored (a crash
// between them loses no change); a read of the record, or of its kind's
// list, made once the change is published answers the state it
// announces, not the one before.
func TestAReadAfterAChangeIsPublishedAnswersItsState(t *testing.T) {
	ctx := context.Background()
	store := &readingStore{Store: readmodelsim.NewStore(nil)}
	m := readmodel.New(readmodel.Config{Firm: firm, Store: store})
	m.Serve(practice.Jobs, nil)
	if err := m.Apply(ctx, []readmodel.Update{{Kind: practice.Jobs, ID: "job_1", Raw: job("job_1", "planned")}}); err != nil {
		t.Fatal(err)
	}
	moved := json.RawMessage(strings.NewReplacer(`"version":1`, `"version":2`, `"updated_at":"2026-03-02T09:00:00Z"`,
		`"updated_at":"2026-03-02T10:00:00Z"`).Replace(string(job("job_1", "in_progress"))))

	type answer struct{ got, list string }
	answers := make(chan answer, 1)
	published := &sink{}
	during := func() {
		if published.count() != 1 {
			t.Error("the state was stored before its change record was published")
		}
		go func() {
			var a answer
			raw, err := m.Get(ctx, live, practice.Jobs, "job_1")
			if err != nil {
				t.Error(err)
			}
			a.got = stageIn(t, raw)
			page, err := m.List(ctx, live, practice.Jobs, practice.Query{Limit: 10})
			if err != nil || len(page.Items) != 1 {
				t.Errorf("list: %v, %d items", err, len(page.Items))
			} else {
				a.list = stageIn(t, page.Items[0])
			}
			answers <- a
		}()
		// The store takes its time; the reads, had they not waited for
		// it, would have answered by now.
		select {
		case a := <-answers:
			answers <- a
		case <-time.After(readmodelAnnounceWait / 2):
		}
	}
	store.during.Store(&during)
	rec := &changes.Recorder{State: m}
	if _, err := rec.Observe(ctx, published, changes.Observation{Tenant: live, Kind: practice.Jobs, ResourceID: "job_1", After: moved}); err != nil {
		t.Fatal(err)
	}
	a := <-answers
	if a.got != "in_progress" || a.list != "in_progress" {
		t.Fatalf("read while the published state was stored: the record %q, the list %q; want in_progress, as the change says", a.got, a.list)
	}
}

// readmodelAnnounceWait is how long a read waits for a state being
// announced (readmodel's announceWait, the bound a read waits for the
// shared feed).
const readmodelAnnounceWait = 500 * time.Millisecond

func stageIn(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var j struct{ Stage string }
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return j.Stage
}
