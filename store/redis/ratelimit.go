package redis

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/internal/gcra"
	"github.com/practicegw/practicegw/store/usage"
)

// gcraSource is GCRA (internal/gcra) in Lua, for batches of requests, with
// hourly usage counting. The rate limiter and the vendor budgets both run
// it.
//
//go:embed lua/gcra.lua
var gcraSource string

// gcraScript runs as EVALSHA and, when Redis does not hold the script
// (after a restart, a failover or SCRIPT FLUSH), as EVAL with its source.
var gcraScript = goredis.NewScript(gcraSource)

// The script's modes for a group, ARGV "consume".
const (
	modePeek        = 0 // only look
	modeBookCount   = 1 // book and count the requests in the usage hash
	modeBookNoCount = 2 // book only: vendor budgets have no usage
)

const (
	rateKeyPrefix  = "pgw:rl:{"
	usageKeyPrefix = "pgw:usage:{"
)

// retentionArg is ARGV[1], the same in every call.
var retentionArg any = strconv.Itoa(int(usage.Retention / time.Hour))

func rateKey(id string) string  { return rateKeyPrefix + id + "}" }
func usageKey(id string) string { return usageKeyPrefix + id + "}" }

// RateLimits keeps every gateway instance's rate-limit buckets and hourly
// usage counts in one Redis. One script call decides a batch of requests,
// often for many credentials, so the keys must all live on one Redis (not
// Redis Cluster). Both keys of a credential carry it as a hash tag ({id}),
// which keeps a credential's keys together should batches ever be split
// by slot.
type RateLimits struct {
	rdb goredis.Cmdable
}

// NewRateLimits keeps buckets and usage in rdb; the caller closes it.
func NewRateLimits(rdb goredis.Cmdable) *RateLimits {
	return &RateLimits{rdb: rdb}
}

// Decide runs the script for the requests added to b since its Reset, in
// one round trip, and returns each request's result in the order added,
// good until b's next Reset. Redis decides on its own clock, except for
// requests given a now (tests pin it).
func (r *RateLimits) Decide(ctx context.Context, b *RateBatch) ([]gcra.Result, error) {
	b.encodeArgs()
	reply, err := gcraScript.Run(ctx, r.rdb, b.keys, b.args...).Result()
	if err != nil {
		return nil, err
	}
	return b.decode(reply)
}

// AddUsage adds counts that were decided while Redis was out of reach.
// It does not trim: the script does that within the hour.
func (r *RateLimits) AddUsage(ctx context.Context, credentialID string, hour time.Time, admitted, refused int64) error {
	h := strconv.FormatInt(hour.Unix()/3600, 10)
	key := usageKey(credentialID)
	_, err := r.rdb.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		if admitted != 0 {
			p.HIncrBy(ctx, key, h+":a", admitted)
		}
		if refused != 0 {
			p.HIncrBy(ctx, key, h+":r", refused)
		}
		p.PExpire(ctx, key, usage.Retention)
		return nil
	})
	return err
}

// Usage reads the credential's hourly counts since the hour holding since,
// oldest first.
func (r *RateLimits) Usage(ctx context.Context, credentialID string, since time.Time) ([]usage.Hour, error) {
	fields, err := r.rdb.HGetAll(ctx, usageKey(credentialID)).Result()
	if err != nil {
		return nil, err
	}
	from := since.Unix() / 3600
	byHour := map[int64]*usage.Hour{}
	for field, v := range fields {
		hs, kind, ok := strings.Cut(field, ":")
		if !ok {
			continue // the "trimmed" marker
		}
		h, err1 := strconv.ParseInt(hs, 10, 64)
		n, err2 := strconv.ParseInt(v, 10, 64)
		if err1 != nil || err2 != nil || h < from {
			continue
		}
		u := byHour[h]
		if u == nil {
			u = &usage.Hour{Hour: time.Unix(h*3600, 0).UTC()}
			byHour[h] = u
		}
		switch kind {
		case "a":
			u.Admitted += n
		case "r":
			u.Refused += n
		}
	}
	out := make([]usage.Hour, 0, len(byHour))
	for _, u := range byHour {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b usage.Hour) int { return a.Hour.Compare(b.Hour) })
	return out, nil
}

// RateBatch is the requests of one round trip, as one script call, and the
// script's answer back as a result each. Its owner reuses it from one
// batch to the next, to spare allocations; it is not safe for concurrent
// use.
type RateBatch struct {
	// Each credential's number in the script's KEYS and the credentials
	// in that order; the batch's groups, by what they share and in order;
	// each request's group; and the results read back.
	credIndex  map[string]int
	creds      []string
	groupIndex map[groupKey]int
	groups     []group
	callGroup  []int
	results    []gcra.Result

	keys []string
	args []any
}

// group is requests of one batch that the script decides together: one
// credential's, under one rate, all booking or all only looking, at one
// clock. Redis does a group's work once however many requests it holds,
// so a busy credential costs Redis little more per batch than an idle one.
type group struct {
	groupKey
	k int   // the credential's number in KEYS, from 1
	n int64 // how many requests
	// From the reply, and used up as decode replays the group: the TAT
	// relative to the group's now, and how many of its requests Redis
	// admitted that the replay has yet to.
	tat, admitted int64
}

type groupKey struct {
	id      string
	cell    gcra.Cell
	consume bool
	now     int64
}

// NewRateBatch returns an empty batch.
func NewRateBatch() *RateBatch {
	return &RateBatch{credIndex: make(map[string]int), groupIndex: make(map[groupKey]int)}
}

// Reset empties the batch for the next round trip.
func (b *RateBatch) Reset() {
	clear(b.credIndex)
	clear(b.groupIndex)
	b.creds, b.groups, b.callGroup = b.creds[:0], b.groups[:0], b.callGroup[:0]
	b.keys, b.args = b.keys[:0], b.args[:0]
}

// Add appends one request of credential id under rate c: booked and
// counted when consume is set, else only looked at; at now (microseconds
// since the epoch), or on Redis's clock when now is 0. Requests that share
// all of that travel as one group; the script decides groups in order of
// their first request, and a group's requests in order.
func (b *RateBatch) Add(id string, c gcra.Cell, consume bool, now int64) {
	key := groupKey{id: id, cell: c, consume: consume, now: now}
	g, ok := b.groupIndex[key]
	if !ok {
		k, ok := b.credIndex[id]
		if !ok {
			b.creds = append(b.creds, id)
			k = len(b.creds) // Lua counts from 1
			b.credIndex[id] = k
			b.keys = append(b.keys, rateKey(id), usageKey(id))
		}
		g = len(b.groups)
		b.groups = append(b.groups, group{groupKey: key, k: k})
		b.groupIndex[key] = g
	}
	b.groups[g].n++
	b.callGroup = append(b.callGroup, g)
}

// encodeArgs sets args to the script's ARGV: six a group.
func (b *RateBatch) encodeArgs() {
	b.args = append(b.args[:0], retentionArg)
	for _, g := range b.groups {
		mode := int64(modePeek)
		if g.consume {
			mode = modeBookCount
		}
		b.args = append(b.args, int64(g.k), g.cell.Interval, g.cell.Tolerance, mode, g.now, g.n)
	}
}

// decode gives each request of the batch its result from the script's
// reply, in order. Redis sends what each group found and how many it
// admitted; each request's own numbers come from replaying the group with
// internal/gcra, which must admit exactly as many.
func (b *RateBatch) decode(reply any) ([]gcra.Result, error) {
	vals, ok := reply.([]any)
	if !ok || len(vals) != 2*len(b.groups) {
		return nil, fmt.Errorf("rate limit script answered %v for %d groups", reply, len(b.groups))
	}
	for i := range b.groups {
		g := &b.groups[i]
		tat, ok1 := vals[2*i].(int64)
		admitted, ok2 := vals[2*i+1].(int64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("rate limit script answered %v and %v in its array", vals[2*i], vals[2*i+1])
		}
		if tat < 0 || admitted < 0 || admitted > g.n {
			return nil, fmt.Errorf("rate limit script answered TAT %d and %d admitted for %d requests", tat, admitted, g.n)
		}
		g.tat, g.admitted = tat, admitted
	}
	b.results = slices.Grow(b.results[:0], len(b.callGroup))
	for _, i := range b.callGroup {
		g := &b.groups[i]
		var r gcra.Result
		if g.consume {
			g.tat, r = g.cell.Step(g.tat, 0)
			if r.Allowed {
				g.admitted-- // one of those Redis admitted
			}
		} else {
			r = g.cell.Peek(g.tat, 0)
		}
		b.results = append(b.results, r)
	}
	for _, g := range b.groups {
		if g.consume && g.admitted != 0 {
			return nil, fmt.Errorf("rate limit script and gateway disagree on %s: Redis admitted %d more", g.id, g.admitted)
		}
	}
	return b.results, nil
}
