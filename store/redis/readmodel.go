package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// The read model (practice/readmodel): each firm's synchronized records,
// the order every instance applies them in, the syncs' checkpoints and the
// leases that let one instance at a time run a sync.
//
//	pgw:rm:{<firm>}:rec:<kind>   hash: record id -> its /v1 JSON
//	pgw:rm:{<firm>}:feed         stream: kind, id, raw (no raw: removed)
//	pgw:rm:checkpoint:<name>     the sync's checkpoint
//	pgw:rm:lease:<name>          the holder, with the lease's TTL
//
// A firm's keys share the hash tag {<firm>}, so the transaction that
// writes its hashes and its stream together runs on Redis Cluster too.
// The stream's entry ids are the Feed's positions: Redis assigns them in
// the order the transactions run, whichever instance runs them.
const (
	keyReadModel  = "pgw:rm:"
	keyCheckpoint = "pgw:rm:checkpoint:"
	keyLease      = "pgw:rm:lease:"
)

// readModelFeedLen is about how many updates a firm's feed keeps. An
// instance follows it within seconds, so only one cut off for a long while
// (or a backfill of a large firm) finds its position trimmed, and loads
// the model whole instead.
const readModelFeedLen = 100_000

// applyBatch bounds the updates in one transaction, so that a backfill's
// large Apply does not hold Redis for long; each batch writes its hashes
// and its feed entries together.
const applyBatch = 500

// loadPage is the HSCAN count hint.
const loadPage = 1000

// defaultSince is how many updates Since returns when n is not positive.
const defaultSince = 1000

// ReadModel is the store's read model state. It is a view of Store rather
// than Store's own methods because Store's Lease and Release are the
// delivery queue's.
type ReadModel struct{ s *Store }

// ReadModel returns the read model's store, feed, checkpoints and leases.
func (s *Store) ReadModel() *ReadModel { return &ReadModel{s: s} }

func recordsKey(firm string, kind practice.Kind) string {
	return keyReadModel + "{" + firm + "}:rec:" + string(kind)
}

func readModelFeedKey(firm string) string { return keyReadModel + "{" + firm + "}:feed" }

// Apply implements readmodel.Store: each batch of updates and their feed
// entries in one MULTI/EXEC, so the records and the feed never disagree.
func (m *ReadModel) Apply(ctx context.Context, firm string, us []readmodel.Update) error {
	if err := checkUpdates(firm, us); err != nil {
		return err
	}
	feed := readModelFeedKey(firm)
	for batch := range slices.Chunk(us, applyBatch) {
		cctx, cancel := m.s.ctx(ctx)
		_, err := m.s.rdb.TxPipelined(cctx, func(p goredis.Pipeliner) error {
			for _, u := range batch {
				appendUpdate(cctx, p, firm, feed, u)
			}
			return nil
		})
		cancel()
		if err != nil {
			return fmt.Errorf("applying %s's read model updates in redis: %w", firm, err)
		}
	}
	return nil
}

// ApplyAfter writes a firm's updates and their feed entries in one
// MULTI/EXEC only if the feed's newest entry is still head: WATCH on the
// feed makes the transaction fail when another instance appended first,
// so an instance never writes a state it compared with an older copy.
func (m *ReadModel) ApplyAfter(ctx context.Context, firm, head string, us []readmodel.Update) (string, bool, error) {
	if err := checkUpdates(firm, us); err != nil {
		return "", false, err
	}
	feed := readModelFeedKey(firm)
	cctx, cancel := m.s.ctx(ctx)
	defer cancel()
	var last *goredis.StringCmd
	err := m.s.rdb.Watch(cctx, func(tx *goredis.Tx) error {
		newest, err := tx.XRevRangeN(cctx, feed, "+", "-", 1).Result()
		if err != nil && !noSuchKey(err) {
			return err
		}
		cur := ""
		if len(newest) == 1 {
			cur = newest[0].ID
		}
		if cur != head {
			return goredis.TxFailedErr
		}
		_, err = tx.TxPipelined(cctx, func(p goredis.Pipeliner) error {
			for _, u := range us {
				last = appendUpdate(cctx, p, firm, feed, u)
			}
			return nil
		})
		return err
	}, feed)
	if errors.Is(err, goredis.TxFailedErr) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("applying %s's read model updates in redis: %w", firm, err)
	}
	return last.Val(), true, nil
}

// appendUpdate queues one update of a firm's records and its feed entry.
func appendUpdate(ctx context.Context, p goredis.Pipeliner, firm, feed string, u readmodel.Update) *goredis.StringCmd {
	entry := []any{"kind", string(u.Kind), "id", u.ID}
	if len(u.Raw) == 0 {
		p.HDel(ctx, recordsKey(firm, u.Kind), u.ID)
	} else {
		// []byte: go-redis refuses json.RawMessage.
		p.HSet(ctx, recordsKey(firm, u.Kind), u.ID, []byte(u.Raw))
		entry = append(entry, "raw", []byte(u.Raw))
	}
	if !u.ReadAt.IsZero() {
		entry = append(entry, "read_at", u.ReadAt.UTC().Format(time.RFC3339Nano))
	}
	return p.XAdd(ctx, &goredis.XAddArgs{Stream: feed, MaxLen: readModelFeedLen, Approx: true, Values: entry})
}

// checkUpdates refuses what Load could not give back: Load scans the
// kinds in practice.Kinds.
func checkUpdates(firm string, us []readmodel.Update) error {
	if firm == "" {
		return fmt.Errorf("read model update without a firm")
	}
	for _, u := range us {
		if !slices.Contains(practice.Kinds, u.Kind) || u.ID == "" {
			return fmt.Errorf("read model update of %s %q: not a record", u.Kind, u.ID)
		}
	}
	return nil
}

// Load implements readmodel.Store, scanning each kind's hash. HSCAN may
// return a record twice (when the hash is resized during the scan); fn
// sees it once.
func (m *ReadModel) Load(ctx context.Context, firm string, fn func(readmodel.Update) error) error {
	for _, kind := range practice.Kinds {
		key := recordsKey(firm, kind)
		seen := map[string]bool{}
		var cursor uint64
		for {
			cctx, cancel := m.s.ctx(ctx)
			kvs, next, err := m.s.rdb.HScan(cctx, key, cursor, "", loadPage).Result()
			cancel()
			if err != nil {
				return fmt.Errorf("loading %s's read model from redis: %w", firm, err)
			}
			for i := 0; i+1 < len(kvs); i += 2 {
				if seen[kvs[i]] {
					continue
				}
				seen[kvs[i]] = true
				if err := fn(readmodel.Update{Kind: kind, ID: kvs[i], Raw: []byte(kvs[i+1])}); err != nil {
					return err
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return nil
}

// Head implements readmodel.UpdateFeed: the id Redis gave the firm's newest
// update, even if trimming has since removed it.
func (m *ReadModel) Head(ctx context.Context, firm string) (string, error) {
	ctx, cancel := m.s.ctx(ctx)
	defer cancel()
	info, err := m.s.rdb.XInfoStream(ctx, readModelFeedKey(firm)).Result()
	if noSuchKey(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s's read model feed in redis: %w", firm, err)
	}
	if info.LastGeneratedID == "0-0" {
		return "", nil
	}
	return info.LastGeneratedID, nil
}

// Since implements readmodel.UpdateFeed. The stream's counts are read in the
// same transaction as its entries and say whether trimming took any after
// pos. Trimming leaves max-deleted-entry-id alone (only XDEL sets it), so
// the test is whether entries were trimmed at all (entries-added exceeds
// the length) and pos is before the first entry kept. That is also true
// when pos is the last entry trimmed and nothing after it was: the reader
// loads the model again, which is never wrong.
func (m *ReadModel) Since(ctx context.Context, firm, pos string, n int) ([]readmodel.Update, string, error) {
	from := pos
	if from == "" {
		from = "0-0"
	}
	if !streamID(from) {
		return nil, pos, fmt.Errorf("%w: %q is not a read model feed position", readmodel.ErrGap, pos)
	}
	if n <= 0 {
		n = defaultSince
	}
	key := readModelFeedKey(firm)
	cctx, cancel := m.s.ctx(ctx)
	defer cancel()
	var (
		info  *goredis.XInfoStreamCmd
		after *goredis.XMessageSliceCmd
	)
	m.s.rdb.TxPipelined(cctx, func(p goredis.Pipeliner) error {
		info = p.XInfoStream(cctx, key)
		after = p.XRangeN(cctx, key, "("+from, "+", int64(n))
		return nil
	})
	if err := info.Err(); noSuchKey(err) {
		if from == "0-0" {
			return nil, pos, nil
		}
		// A firm's feed is never removed, only trimmed: this Redis is not
		// the one pos was read from (emptied, or restored from a backup).
		return nil, pos, fmt.Errorf("%w: %s's feed is gone", readmodel.ErrGap, firm)
	} else if err != nil {
		return nil, pos, fmt.Errorf("following %s's read model feed in redis: %w", firm, err)
	}
	if err := after.Err(); err != nil {
		return nil, pos, fmt.Errorf("following %s's read model feed in redis: %w", firm, err)
	}
	st := info.Val()
	switch {
	case compareIDs(from, st.LastGeneratedID) > 0:
		return nil, pos, fmt.Errorf("%w: %s's feed has not reached %s", readmodel.ErrGap, firm, pos)
	case compareIDs(from, st.MaxDeletedEntryID) < 0:
		return nil, pos, fmt.Errorf("%w: %s's feed lost updates after %s", readmodel.ErrGap, firm, pos)
	case st.EntriesAdded > st.Length:
		kept := st.LastGeneratedID // none kept: everything up to the last was trimmed
		if st.Length > 0 {
			kept = st.FirstEntry.ID
		}
		if compareIDs(from, kept) < 0 {
			return nil, pos, fmt.Errorf("%w: %s's feed was trimmed past %s", readmodel.ErrGap, firm, pos)
		}
	}
	msgs := after.Val()
	if len(msgs) == 0 {
		return nil, pos, nil
	}
	us := make([]readmodel.Update, len(msgs))
	for i, msg := range msgs {
		kind, _ := msg.Values["kind"].(string)
		id, _ := msg.Values["id"].(string)
		us[i] = readmodel.Update{Kind: practice.Kind(kind), ID: id}
		if raw, _ := msg.Values["raw"].(string); raw != "" {
			us[i].Raw = []byte(raw)
		}
		if at, _ := msg.Values["read_at"].(string); at != "" {
			us[i].ReadAt, _ = time.Parse(time.RFC3339Nano, at)
		}
	}
	return us, msgs[len(msgs)-1].ID, nil
}

// compareIDs orders two stream entry ids, "<ms>-<seq>"; both are valid.
func compareIDs(a, b string) int {
	ams, aseq, _ := strings.Cut(a, "-")
	bms, bseq, _ := strings.Cut(b, "-")
	am, _ := strconv.ParseUint(ams, 10, 64)
	bm, _ := strconv.ParseUint(bms, 10, 64)
	if c := cmpUint(am, bm); c != 0 {
		return c
	}
	as, _ := strconv.ParseUint(aseq, 10, 64)
	bs, _ := strconv.ParseUint(bseq, 10, 64)
	return cmpUint(as, bs)
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func noSuchKey(err error) bool { return err != nil && strings.Contains(err.Error(), "no such key") }

// Checkpoint implements readmodel.Checkpoints.
func (m *ReadModel) Checkpoint(ctx context.Context, name string) ([]byte, error) {
	ctx, cancel := m.s.ctx(ctx)
	defer cancel()
	v, err := m.s.rdb.Get(ctx, keyCheckpoint+name).Bytes()
	if isNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint %s from redis: %w", name, err)
	}
	if v == nil {
		// A saved empty value is not "nothing saved".
		v = []byte{}
	}
	return v, nil
}

// SaveCheckpoint implements readmodel.Checkpoints.
func (m *ReadModel) SaveCheckpoint(ctx context.Context, name string, value []byte) error {
	ctx, cancel := m.s.ctx(ctx)
	defer cancel()
	if err := m.s.rdb.Set(ctx, keyCheckpoint+name, value, 0).Err(); err != nil {
		return fmt.Errorf("saving checkpoint %s in redis: %w", name, err)
	}
	return nil
}

// saveHeldScript saves the checkpoint KEYS[1] only while ARGV[1] holds
// the lease KEYS[2]; an expired lease's key is gone, so it fails too.
// The two keys are read and written in one script: on Redis Cluster they
// must share a slot, which a sync's names (sync/<firm>/<role>) do not
// give them yet; a standalone or replicated Redis, as deployed, runs it.
var saveHeldScript = goredis.NewScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1`)

// SaveHeldCheckpoint implements readmodel.Checkpoints.
func (m *ReadModel) SaveHeldCheckpoint(ctx context.Context, name string, value []byte, lease, holder string) (bool, error) {
	if holder == "" {
		return false, nil
	}
	ctx, cancel := m.s.ctx(ctx)
	defer cancel()
	ok, err := saveHeldScript.Run(ctx, m.s.rdb, []string{keyCheckpoint + name, keyLease + lease}, holder, value).Int()
	if err != nil {
		return false, fmt.Errorf("saving checkpoint %s in redis: %w", name, err)
	}
	return ok == 1, nil
}

// leaseScript renews the lease when ARGV[1] holds it, and takes it when
// no one does, in one step so that no other holder can take it between.
var leaseScript = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if cur then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)

// releaseScript removes the lease only when ARGV[1] holds it: a holder
// whose lease expired and was taken must not release the new holder's.
var releaseScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0`)

// Lease implements readmodel.Leases, by Redis's clock: the key's TTL is
// the lease.
func (m *ReadModel) Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if holder == "" || ttl < time.Millisecond {
		return false, fmt.Errorf("lease %s: a holder and a ttl of at least 1ms are required", name)
	}
	ctx, cancel := m.s.ctx(ctx)
	defer cancel()
	ok, err := leaseScript.Run(ctx, m.s.rdb, []string{keyLease + name}, holder, ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("lease %s in redis: %w", name, err)
	}
	return ok == 1, nil
}

// Release implements readmodel.Leases.
func (m *ReadModel) Release(ctx context.Context, name, holder string) error {
	ctx, cancel := m.s.ctx(ctx)
	defer cancel()
	if err := releaseScript.Run(ctx, m.s.rdb, []string{keyLease + name}, holder).Err(); err != nil {
		return fmt.Errorf("releasing lease %s in redis: %w", name, err)
	}
	return nil
}

// Interface guards.
var (
	_ readmodel.Store       = (*ReadModel)(nil)
	_ readmodel.UpdateFeed  = (*ReadModel)(nil)
	_ readmodel.Checkpoints = (*ReadModel)(nil)
	_ readmodel.Leases      = (*ReadModel)(nil)
)

// DropRetiredTombstones deletes the tombstone keys an earlier version kept
// beside each firm's read model (pgw:rm:{<firm>}:tomb:<kind>, tombid:,
// tombat:): a removed record's tombstone lives in its kind's records hash
// now, and nothing reads those keys. It runs once per store, as its mark
// says; side by side is safe.
func (m *ReadModel) DropRetiredTombstones(ctx context.Context) error {
	return m.s.sealOnce(ctx, "tombstones_retired", func(ctx context.Context) error {
		drop := func(ctx context.Context, node goredis.Cmdable) error {
			for cursor := uint64(0); ; {
				cctx, cancel := m.s.ctx(ctx)
				keys, next, err := node.Scan(cctx, cursor, keyReadModel+"{*}:tomb*", 500).Result()
				if err == nil && len(keys) > 0 {
					// One key a call: the keys of different firms may
					// live on different nodes.
					for _, k := range keys {
						if err = node.Del(cctx, k).Err(); err != nil {
							break
						}
					}
				}
				cancel()
				if err != nil {
					return fmt.Errorf("dropping retired tombstone keys: %w", err)
				}
				if cursor = next; cursor == 0 {
					return nil
				}
			}
		}
		if c, ok := m.s.rdb.(*goredis.ClusterClient); ok {
			return c.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error { return drop(ctx, node) })
		}
		return drop(ctx, m.s.rdb)
	})
}

// Purge implements readmodel.Purger. The firm's record keys share its
// hash tag, so they go in one DEL; the checkpoints do not, so each goes
// alone (on Redis Cluster one DEL must stay in one slot). The feed is
// left alone: it is the order of past writes, which no instance replays
// into a model loaded afresh.
func (m *ReadModel) Purge(ctx context.Context, firm string, kinds []practice.Kind, checkpoints []string) error {
	ctx, cancel := m.s.ctx(ctx)
	defer cancel()
	keys := make([]string, 0, len(kinds))
	for _, k := range kinds {
		keys = append(keys, recordsKey(firm, k))
	}
	if len(keys) > 0 {
		if err := m.s.rdb.Del(ctx, keys...).Err(); err != nil {
			return fmt.Errorf("purging %s's read model in redis: %w", firm, err)
		}
	}
	for _, name := range checkpoints {
		if err := m.s.rdb.Del(ctx, keyCheckpoint+name).Err(); err != nil {
			return fmt.Errorf("purging checkpoint %s in redis: %w", name, err)
		}
	}
	return nil
}

// fenceKey is the hash of a firm's fences (name -> generation), under
// the firm's hash tag so that a write's transaction watches it with the
// firm's records.
func fenceKey(firm string) string { return keyReadModel + "{" + firm + "}:fence" }

// raiseFenceScript sets the fence ARGV[1] of hash KEYS[1] to ARGV[2]
// unless it is already there or past it.
var raiseFenceScript = goredis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '-1')
if tonumber(ARGV[2]) > cur then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 0`)

// RaiseFence implements readmodel.Fencer.
func (m *ReadModel) RaiseFence(ctx context.Context, f readmodel.Fence) error {
	ctx, cancel := m.s.ctx(ctx)
	defer cancel()
	if err := raiseFenceScript.Run(ctx, m.s.rdb, []string{fenceKey(f.Firm)}, f.Name, f.Generation).Err(); err != nil {
		return fmt.Errorf("raising fence %s of %s in redis: %w", f.Name, f.Firm, err)
	}
	return nil
}

// ApplyFenced implements readmodel.Fencer: the fence is read under WATCH
// with the feed, so a fence raised between the read and the write fails
// the transaction, which then reads it again. Unconditional (after nil)
// updates go in batches of applyBatch, each checked.
func (m *ReadModel) ApplyFenced(ctx context.Context, f readmodel.Fence, after *string, us []readmodel.Update) (string, bool, error) {
	if err := checkUpdates(f.Firm, us); err != nil {
		return "", false, err
	}
	batches := [][]readmodel.Update{us}
	if after == nil {
		batches = slices.Collect(slices.Chunk(us, applyBatch))
	}
	next := ""
	for _, batch := range batches {
		n, ok, err := m.applyFencedBatch(ctx, f, after, batch)
		if err != nil || !ok {
			return "", ok, err
		}
		next = n
	}
	return next, true, nil
}

func (m *ReadModel) applyFencedBatch(ctx context.Context, f readmodel.Fence, after *string, us []readmodel.Update) (string, bool, error) {
	feed := readModelFeedKey(f.Firm)
	cctx, cancel := m.s.ctx(ctx)
	defer cancel()
	watched := []string{fenceKey(f.Firm)}
	if after != nil {
		watched = append(watched, feed)
	}
	for {
		var last *goredis.StringCmd
		taken := true
		err := m.s.rdb.Watch(cctx, func(tx *goredis.Tx) error {
			fence, err := tx.HGet(cctx, fenceKey(f.Firm), f.Name).Int64()
			switch {
			case err == nil && fence > f.Generation:
				return readmodel.ErrFenced
			case err != nil && !isNil(err):
				return err
			}
			if after != nil {
				newest, err := tx.XRevRangeN(cctx, feed, "+", "-", 1).Result()
				if err != nil && !noSuchKey(err) {
					return err
				}
				cur := ""
				if len(newest) == 1 {
					cur = newest[0].ID
				}
				if cur != *after {
					taken = false
					return nil
				}
			}
			_, err = tx.TxPipelined(cctx, func(p goredis.Pipeliner) error {
				for _, u := range us {
					last = appendUpdate(cctx, p, f.Firm, feed, u)
				}
				return nil
			})
			return err
		}, watched...)
		switch {
		case errors.Is(err, goredis.TxFailedErr) && after == nil:
			// The fence moved under the watch: it is read again.
			continue
		case errors.Is(err, goredis.TxFailedErr) || err == nil && !taken:
			return "", false, nil
		case err != nil:
			return "", false, fmt.Errorf("applying %s's read model updates in redis: %w", f.Firm, err)
		}
		return last.Val(), true, nil
	}
}

// saveFencedScript is saveHeldScript that first checks the fence ARGV[3]
// of hash KEYS[3] is not past generation ARGV[4] (-1 when it is).
var saveFencedScript = goredis.NewScript(`
local fence = tonumber(redis.call('HGET', KEYS[3], ARGV[3]) or '-1')
if fence > tonumber(ARGV[4]) then return -1 end
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1`)

// SaveFencedCheckpoint implements readmodel.Fencer. Like
// SaveHeldCheckpoint, its keys do not share a slot on Redis Cluster.
func (m *ReadModel) SaveFencedCheckpoint(ctx context.Context, f readmodel.Fence, name string, value []byte, lease, holder string) (bool, error) {
	if holder == "" {
		return false, nil
	}
	ctx, cancel := m.s.ctx(ctx)
	defer cancel()
	n, err := saveFencedScript.Run(ctx, m.s.rdb, []string{keyCheckpoint + name, keyLease + lease, fenceKey(f.Firm)},
		holder, value, f.Name, f.Generation).Int()
	switch {
	case err != nil:
		return false, fmt.Errorf("saving checkpoint %s in redis: %w", name, err)
	case n < 0:
		return false, fmt.Errorf("saving checkpoint %s: %w", name, readmodel.ErrFenced)
	}
	return n == 1, nil
}

var _ readmodel.Fencer = (*ReadModel)(nil)
