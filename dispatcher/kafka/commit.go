package kafka

import (
	"context"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// commitEvery is how often a generation's durable offsets are committed.
// A commit per batch per partition cost a round trip to the coordinator
// each, hundreds a second; committing later is safe (a later offset covers
// the earlier ones) and only widens what a crash makes the next owner do
// again, which changes nothing.
const commitEvery = 200 * time.Millisecond

// committer commits one generation's offsets: every partition goroutine
// marks what is durable, and the committer sends the latest marks
// together. It is the last of the generation's goroutines to finish: it
// waits for the partitions to drain and commits their final offsets
// before the group moves on.
type committer struct {
	gen   *kafkago.Generation
	topic string
	log   *zap.Logger
	parts sync.WaitGroup // the generation's partition goroutines

	mu      sync.Mutex
	pending map[int]int64 // partition -> next offset to read, not yet committed
}

func newCommitter(gen *kafkago.Generation, topic string, log *zap.Logger) *committer {
	return &committer{gen: gen, topic: topic, log: log, pending: make(map[int]int64)}
}

// mark records that everything before offset in partition is durable.
func (c *committer) mark(partition int, offset int64) {
	c.mu.Lock()
	c.pending[partition] = offset
	c.mu.Unlock()
}

// run commits every commitEvery until the generation ends, then waits for
// the partitions to finish their batches and commits once more.
func (c *committer) run(ctx context.Context) {
	t := time.NewTicker(commitEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.parts.Wait()
			c.flush()
			return
		case <-t.C:
			// A failed flush keeps its marks for the next one. If the
			// generation is over for us (a rebalance, a lost coordinator),
			// its heartbeat fails too and ends it.
			c.flush()
		}
	}
}

// flush commits the marks made since the last flush.
func (c *committer) flush() {
	c.mu.Lock()
	offsets := c.pending
	c.pending = make(map[int]int64)
	c.mu.Unlock()
	if len(offsets) == 0 {
		return
	}
	if err := c.gen.CommitOffsets(map[string]map[int]int64{c.topic: offsets}); err != nil {
		c.log.Warn("committing offsets failed; retrying (until it succeeds, a new owner of these partitions would handle their latest changes again, harmlessly)",
			zap.Int32("generation", c.gen.ID), zap.Error(err))
		// Keep the marks for a retry unless newer ones came meanwhile.
		c.mu.Lock()
		for p, o := range offsets {
			if _, ok := c.pending[p]; !ok {
				c.pending[p] = o
			}
		}
		c.mu.Unlock()
	}
}
