package ratelimit

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// gcraScript decides a batch of requests. Run sends EVALSHA and, when
// Redis does not hold the script (after a restart, a failover or SCRIPT
// FLUSH), EVAL with its source.
var gcraScript = redis.NewScript(gcraSource)

const (
	rateKeyPrefix  = "pgw:rl:{"
	usageKeyPrefix = "pgw:usage:{"
)

// retentionArg is ARGV[1], the same in every call.
var retentionArg any = strconv.Itoa(retentionHours)

// batch turns the requests of one round trip into one script call and the
// script's answer back into a decision each. It is kept by the pipeline
// goroutine and reused, to spare allocations.
type batch struct {
	// Each credential's number in the script's KEYS and the credentials
	// in that order; the batch's groups, by what they share and in order;
	// each call's group; and the decisions read back.
	credIndex  map[string]int
	creds      []string
	groupIndex map[groupKey]int
	groups     []group
	callGroup  []int
	decisions  []Decision

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
	cell    cell
	consume bool
	now     int64
}

func newBatch() *batch {
	return &batch{credIndex: make(map[string]int), groupIndex: make(map[groupKey]int)}
}

// encode sets keys and args to the script call that decides every call in
// calls. Calls that share a group travel as one, and each credential's
// keys appear once. The script decides groups in order of their first
// call, and a group's calls in order.
func (b *batch) encode(calls []*scriptCall) {
	clear(b.credIndex)
	clear(b.groupIndex)
	b.creds, b.groups, b.callGroup = b.creds[:0], b.groups[:0], b.callGroup[:0]
	for _, call := range calls {
		key := groupKey{id: call.id, cell: call.cell, consume: call.consume, now: call.now}
		g, ok := b.groupIndex[key]
		if !ok {
			k, ok := b.credIndex[call.id]
			if !ok {
				b.creds = append(b.creds, call.id)
				k = len(b.creds) // Lua counts from 1
				b.credIndex[call.id] = k
			}
			g = len(b.groups)
			b.groups = append(b.groups, group{groupKey: key, k: k})
			b.groupIndex[key] = g
		}
		b.groups[g].n++
		b.callGroup = append(b.callGroup, g)
	}
	b.keys = b.keys[:0]
	for _, id := range b.creds {
		b.keys = append(b.keys, rateKey(id), usageKey(id))
	}
	b.args = append(b.args[:0], retentionArg)
	for _, g := range b.groups {
		consume := int64(0)
		if g.consume {
			consume = 1
		}
		b.args = append(b.args, int64(g.k), g.cell.interval, g.cell.tolerance, consume, g.now, g.n)
	}
}

func rateKey(id string) string  { return rateKeyPrefix + id + "}" }
func usageKey(id string) string { return usageKeyPrefix + id + "}" }

// decode gives each call of the last encoded batch its decision from the
// script's reply, in order, good until the next decode. Redis sends what
// each group found and how many it admitted; each call's own numbers come
// from replaying the group in Go, which must admit exactly as many.
func (b *batch) decode(reply any) ([]Decision, error) {
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
	b.decisions = slices.Grow(b.decisions[:0], len(b.callGroup))
	for _, i := range b.callGroup {
		g := &b.groups[i]
		var d Decision
		g.tat, d = g.cell.step(g.tat, 0, g.consume)
		if g.consume && d.Allowed {
			g.admitted-- // one of those Redis admitted
		}
		b.decisions = append(b.decisions, d)
	}
	for _, g := range b.groups {
		if g.consume && g.admitted != 0 {
			return nil, fmt.Errorf("rate limit script and gateway disagree on %s: Redis admitted %d more", g.id, g.admitted)
		}
	}
	return b.decisions, nil
}
