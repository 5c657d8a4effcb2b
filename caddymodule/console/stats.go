package console

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// statsWindow is the period endpoint health covers.
const statsWindow = 24 * time.Hour

// maxStatsScan caps the deliveries read to summarise one endpoint, so a
// busy endpoint cannot make a page slow; the page says when it is reached.
const maxStatsScan = 2000

// endpointStats summarises an endpoint's deliveries created in the last
// 24 hours and every attempt on them.
type endpointStats struct {
	Deliveries, Delivered, Failed, Retrying, Pending int
	// Attempts and OK count attempts; OK ones got a 2xx in time.
	Attempts, OK int
	// P50 and P95 are attempt durations in milliseconds.
	P50, P95 int64
	// Last is the latest attempt, LastFailure the latest failed one.
	Last        *attemptAt
	LastFailure *attemptAt
	// Capped says only the first maxStatsScan deliveries were read.
	Capped bool
}

// attemptAt is an attempt with the delivery it belongs to.
type attemptAt struct {
	dispatcher.Attempt
	DeliveryID string
	Event      string
}

// SuccessRate is the share of attempts that succeeded, or -1 without any.
func (s endpointStats) SuccessRate() float64 {
	if s.Attempts == 0 {
		return -1
	}
	return float64(s.OK) / float64(s.Attempts)
}

// succeeded reports whether an attempt was accepted: a 2xx answer in time.
func succeeded(a dispatcher.Attempt) bool {
	return a.Error == "" && a.ResponseCode >= 200 && a.ResponseCode < 300
}

// summarise computes the stats of a set of deliveries.
func summarise(ds []dispatcher.Delivery) endpointStats {
	var s endpointStats
	var durations []int64
	for _, d := range ds {
		s.Deliveries++
		switch d.State {
		case dispatcher.StateDelivered:
			s.Delivered++
		case dispatcher.StateFailed:
			s.Failed++
		case dispatcher.StateRetrying:
			s.Retrying++
		case dispatcher.StatePending:
			s.Pending++
		}
		for _, a := range d.Attempts {
			s.Attempts++
			durations = append(durations, a.DurationMS)
			at := &attemptAt{Attempt: a, DeliveryID: d.ID, Event: d.Event}
			if s.Last == nil || a.StartedAt.After(s.Last.StartedAt) {
				s.Last = at
			}
			if succeeded(a) {
				s.OK++
			} else if s.LastFailure == nil || a.StartedAt.After(s.LastFailure.StartedAt) {
				s.LastFailure = at
			}
		}
	}
	slices.Sort(durations)
	s.P50, s.P95 = percentile(durations, 50), percentile(durations, 95)
	return s
}

// percentile returns the nearest-rank percentile p of sorted values, or 0
// for none.
func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

// health is how an endpoint is doing, in a word and a colour.
type health struct {
	Class string // ok, warn, bad, idle
	Label string
	// Rank orders endpoints worst first.
	Rank int
}

func (s endpointStats) health(ep dispatcher.Endpoint) health {
	switch {
	case ep.Status != dispatcher.EndpointEnabled:
		return health{"bad", "Disabled", 0}
	case s.Last != nil && !succeeded(s.Last.Attempt):
		return health{"bad", "Failing", 1}
	case s.Failed > 0:
		return health{"warn", fmt.Sprintf("Recovered, %d failed", s.Failed), 2}
	case s.Retrying > 0:
		return health{"warn", "Retrying", 3}
	case s.Attempts == 0:
		return health{"idle", "No deliveries", 5}
	}
	return health{"ok", "Healthy", 4}
}

// endpointStatsOf pages through an endpoint's deliveries of the last 24
// hours, up to maxStatsScan.
func endpointStatsOf(ctx context.Context, e deliveryPages, t practice.Tenant, id string, now time.Time) (endpointStats, error) {
	var all []dispatcher.Delivery
	q := dispatcher.DeliveryQuery{EndpointID: id, From: now.Add(-statsWindow), Limit: dispatcher.MaxLimit}
	capped := false
	for {
		page, err := e.ListDeliveries(ctx, t, q)
		if err != nil {
			return endpointStats{}, fmt.Errorf("reading deliveries of %s: %w", id, err)
		}
		all = append(all, page.Deliveries...)
		if !page.HasMore {
			break
		}
		if len(all) >= maxStatsScan {
			capped = true
			break
		}
		q.Cursor = page.Next
	}
	s := summarise(all)
	s.Capped = capped
	return s, nil
}
