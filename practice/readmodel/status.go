package readmodel

import (
	"fmt"
	"strings"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Status is a firm system's sync as /readyz, the console and the metrics
// show it.
type Status struct {
	Firm   string
	Role   string // the role: records, ledger, documents
	System string // the system: karbon, xero, ...
	Label  string // the system, for people
	// State is backfilling, live, lagging or failing; Why says why a
	// failing sync fails.
	State string
	Why   string
	// Holder is the instance that runs the sync.
	Holder string
	// HeldBy are the instances (as they advertise themselves) that hold
	// the firm's read model in memory, when each instance holds a share
	// of the firms; empty when every instance holds every firm.
	HeldBy []string
	Kinds  []KindStatus
	// ConfirmedAt is the oldest of the kinds' (zero until every kind is
	// backfilled): every record served is at least this fresh.
	ConfirmedAt time.Time
	// CallsLastHour are the holder's calls to the vendor in the last
	// hour, against BudgetPerHour, the vendor's published limit (0 when
	// unknown).
	CallsLastHour uint64
	BudgetPerHour int
	// Plan is how the sync spaces its polls to keep within its share of
	// the vendor's allowances.
	Plan Plan
	// Latency is the last hour's time from a vendor's notification to its
	// change record, as this instance measured it (the reads it made).
	Latency LatencySummary
	// SubscribedUntil is when the vendor's subscription lapses unless
	// renewed (a system whose vendor notifies only while subscribed);
	// SubscribeError why the holder could not make or renew it.
	SubscribedUntil time.Time
	SubscribeError  string
	// Unusable are the records whose vendor answers the sync cannot use:
	// served as last known, asked for again at each poll of their kind.
	Unusable []Unusable
	// Links are what a ledger or document store found of its customers
	// or client folders in the firm's records system, as this instance
	// mapped them; nil for a records system, or with linking off.
	Links *Links
}

// Links count the customers (or client folders) a system asked the
// firm's records system for, by the last answer for each: Missing match
// no client, Ambiguous more than one; their records name no client.
type Links struct {
	// Of is what was asked for ("Xero contacts", "client folders"); In
	// is the records system ("Karbon"), empty when the firm has none.
	Of, In                                 string
	Candidates, Linked, Missing, Ambiguous int
}

// String says it for an administrator: "12 of 340 Xero contacts match
// no Karbon client; 2 match more than one".
func (l Links) String() string {
	in := l.In
	if in == "" {
		in = "records system's"
	}
	s := fmt.Sprintf("%d of %d %s match no %s client", l.Missing, l.Candidates, l.Of, in)
	if l.Ambiguous > 0 {
		s += fmt.Sprintf("; %d match more than one, and link none", l.Ambiguous)
	}
	return s
}

// KindStatus is one kind's part of a sync.
type KindStatus struct {
	Kind       practice.Kind
	Backfilled bool
	// Seen is how many records the current full pass has read; About is
	// how many the last one found (0 before the first ended).
	Seen, About int
	// Records is how many this instance holds.
	Records     int
	ConfirmedAt time.Time
	// State is this kind's own (backfilling, live, lagging, failing):
	// one kind failing leaves the others live. Why says why it is not.
	State, Why string
	// Notified says the vendor notifies the kind's changes, read as soon
	// as they come; else only the polls (Status.Plan) find them.
	Notified bool
	// Unusable counts the kind's records whose vendor answers cannot be
	// used (Status.Unusable names them): the kind stays live.
	Unusable int
}

// Reaches says for people how a kind's changes reach the gateway:
// "notified, polled every 1m as well" or "polled every 8m10s".
func (st Status) Reaches(k practice.Kind) string {
	every := ""
	if d, ok := st.Plan.PollEvery[string(k)]; ok {
		every = shortDuration(d)
	} else if d, ok := st.Plan.PollEvery[passFeed]; ok {
		every = shortDuration(d)
	}
	for _, ks := range st.Kinds {
		if ks.Kind != k || !ks.Notified {
			continue
		}
		if every == "" {
			return "notified; reconciled daily"
		}
		return "notified; polled every " + every + " as well"
	}
	if every == "" {
		return "reconciled daily"
	}
	return "polled every " + every
}

// Age is how old the data is at now: since ConfirmedAt.
func (st Status) Age(now time.Time) time.Duration {
	if st.ConfirmedAt.IsZero() {
		return 0
	}
	return now.Sub(st.ConfirmedAt)
}

// Progress says how far a backfill has come, for people: "Karbon jobs:
// 3,200 of about 5,000; Karbon clients: 120".
func (st Status) Progress() string {
	var parts []string
	for _, k := range st.Kinds {
		if k.Backfilled {
			continue
		}
		p := fmt.Sprintf("%s %s: %s", st.Label, k.Kind, thousands(k.Seen))
		if k.About > 0 {
			p += " of about " + thousands(k.About)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Status reports the sync as this instance knows it: its own when it
// holds the lease, else the holder's last checkpoint.
func (s *Syncer) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked()
}

// lagAfter is how old k's confirmation may grow before k is lagging:
// three intervals and a lease's time (the holder is gone, or its passes
// take longer than the interval), and twice the last pass's own length,
// since a pass confirms the copy as of its start and says so at its end
// (a backfill of thousands of work items, a whole listing of them).
func (s *Syncer) lagAfter(k practice.Kind, kp *kindProgress) time.Duration {
	ended := kp.PolledAt
	if kp.ReconciledAt.After(ended) {
		ended = kp.ReconciledAt
	}
	return 3*s.interval(k) + s.config.LeaseTTL + 2*max(ended.Sub(kp.ConfirmedAt), 0)
}

// statusLocked is Status; the caller holds mu.
func (s *Syncer) statusLocked() Status {
	now := s.now()
	p := s.progress
	st := Status{
		Firm: s.model.Firm(), Role: s.sys.Role, System: s.sys.System, Label: s.sys.Label, Holder: p.Holder,
		CallsLastHour: p.CallsLastHour, BudgetPerHour: s.budgetPerHour,
	}
	backfilled := true
	var lagging, failing []string
	for i, k := range s.sys.Kinds {
		kp := s.kindProgress(k)
		ks := KindStatus{Kind: k, Backfilled: kp.Backfilled, Seen: kp.Seen, About: kp.About,
			Records: s.model.Count(k), ConfirmedAt: kp.ConfirmedAt, State: StateLive, Unusable: len(kp.Unusable)}
		if n, ok := s.sys.Reader.(Notifier); ok {
			ks.Notified = n.Notifies(k)
		}
		if _, ok := s.sys.Reader.(Subscriber); ok {
			// Notified while the subscription the holder keeps lives.
			ks.Notified = p.SubscribeError == "" && now.Before(p.SubscribedUntil)
		}
		backfilled = backfilled && kp.Backfilled
		if i == 0 || kp.ConfirmedAt.Before(st.ConfirmedAt) {
			st.ConfirmedAt = kp.ConfirmedAt
		}
		switch {
		case p.Error != "":
			ks.State, ks.Why = StateFailing, p.Error
		case kp.Error != "":
			ks.State, ks.Why = StateFailing, kp.Error
			failing = append(failing, fmt.Sprintf("%s: %s", k, kp.Error))
		case !kp.Backfilled:
			ks.State = StateBackfilling
		case now.Sub(kp.ConfirmedAt) > s.lagAfter(k, kp):
			ks.State, ks.Why = StateLagging, fmt.Sprintf("%s not confirmed since %s", k, kp.ConfirmedAt.Format(time.RFC3339))
			lagging = append(lagging, ks.Why)
		}
		st.Kinds = append(st.Kinds, ks)
	}
	if !backfilled {
		st.ConfirmedAt = time.Time{}
	}
	switch {
	case p.Error != "":
		st.State, st.Why = StateFailing, p.Error
	case len(failing) > 0:
		st.State, st.Why = StateFailing, strings.Join(failing, "; ")
	case !backfilled:
		st.State = StateBackfilling
	case len(lagging) > 0:
		st.State, st.Why = StateLagging, strings.Join(lagging, "; ")
	default:
		st.State = StateLive
	}
	st.Unusable = s.unusableLocked()
	s.describePlan(&st)
	st.Latency = s.latency.Summary(now)
	st.SubscribedUntil, st.SubscribeError = p.SubscribedUntil, p.SubscribeError
	return st
}
