package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
)

// Claim leases due deliveries in one script: expired leases first, then
// endpoint by endpoint in head order, each within its room.
func (s *Store) Claim(ctx context.Context, r dispatcher.ClaimRequest) ([]dispatcher.Claim, time.Time, error) {
	if r.Max <= 0 {
		return nil, time.Time{}, nil
	}
	perFirm := r.PerFirm
	if perFirm <= 0 {
		perFirm = -1 // no bound
	}
	args := make([]any, 0, 7+2*len(r.FirmRoom)+2*len(r.Room))
	args = append(args, micros(r.Now), micros(r.LeaseUntil), r.Max, r.PerEndpoint, newToken()+":", perFirm, len(r.FirmRoom))
	for firm, room := range r.FirmRoom {
		args = append(args, firm, room)
	}
	for id, room := range r.Room {
		args = append(args, id, room)
	}
	res, err := s.run(ctx, s.scripts.claim, args...)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("claim: %w", err)
	}
	arr, _ := res.([]any)
	if len(arr) != 2 {
		return nil, time.Time{}, fmt.Errorf("claim: unexpected answer %v", res)
	}
	nextS, _ := arr[0].(string)
	var next time.Time
	if nextS != "" {
		next = fromMicros(nextS)
		if next.Before(r.Now) {
			next = r.Now
		}
	}
	raw, _ := arr[1].([]any)
	claims := make([]dispatcher.Claim, 0, len(raw))
	for _, c := range raw {
		parts, _ := c.([]any)
		if len(parts) != 3 {
			return nil, time.Time{}, fmt.Errorf("claim: unexpected claim %v", c)
		}
		token, _ := parts[0].(string)
		f, ok, err := decodeFetched(parts[1])
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("claim: %w", err)
		}
		if !ok {
			continue
		}
		claim := dispatcher.Claim{
			Delivery: f.d,
			Lease:    dispatcher.Lease{DeliveryID: f.d.ID, Token: token, Until: f.until},
			Replay:   f.replay,
		}
		if raw, ok := parts[2].(string); ok {
			// The attempt reads the event itself if this cannot.
			if ev, err := decodeEvent([]byte(raw)); err == nil {
				claim.Event = &ev
			}
		}
		claims = append(claims, claim)
	}
	return claims, next, nil
}

// Release gives leases back without an attempt.
func (s *Store) Release(ctx context.Context, leases []dispatcher.Lease, notBefore time.Time) error {
	if len(leases) == 0 {
		return nil
	}
	nbUs := ""
	if !notBefore.IsZero() {
		nbUs = micros(notBefore)
	}
	args := make([]any, 0, 2+2*len(leases))
	args = append(args, nanos(notBefore), nbUs)
	for _, l := range leases {
		args = append(args, l.DeliveryID, l.Token)
	}
	if _, err := s.run(ctx, s.scripts.release, args...); err != nil {
		return fmt.Errorf("release deliveries: %w", err)
	}
	return nil
}

// Snooze holds the endpoint's queue back until until.
func (s *Store) Snooze(ctx context.Context, endpointID string, until time.Time) error {
	u := ""
	if !until.IsZero() {
		u = micros(until)
	}
	if _, err := s.run(ctx, s.scripts.snooze, endpointID, u); err != nil {
		return fmt.Errorf("snooze endpoint %s: %w", endpointID, err)
	}
	return nil
}

// Backlog counts queued deliveries.
func (s *Store) Backlog(ctx context.Context) (int64, error) {
	cctx, cancel := s.ctx(ctx)
	defer cancel()
	v, err := s.rdb.Get(cctx, s.key("backlog")).Result()
	if isNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("count backlog: %w", err)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("count backlog: %w", err)
	}
	return max(n, 0), nil
}
