// Package notifications keeps a vendor's change notifications (Karbon's,
// Xero's and Intuit's webhooks) until what they name is read: a verified
// notification is kept in an Inbox before it is answered, so that it is
// answered within the vendor's time whatever it names, a crash loses
// nothing it named, and the reads it asks for are made once, within the
// vendor's allowance, by whichever instance takes them.
//
// A signature proves who wrote a body, not when: Karbon's has no
// timestamp, so a captured notification posted again verifies for ever.
// A body kept within the last hour is not kept again, and the reads it
// named are not made again.
package notifications

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Window is how long a body kept stays known: a vendor's redeliveries
// of a body come within it, and an item not read within it (its vendor
// failing every read for an hour) is dropped, left to the sync's polls
// and reconciliation.
const Window = time.Hour

// Inbox keeps the items of verified notifications until they are read.
// With Redis it is shared, so that any instance reads what any other
// kept; alone, it is the bbolt file (or memory).
type Inbox interface {
	// KeepNotification keeps items (the reads one verified body asks
	// for) pending in scope under key, unless key was kept within Window:
	// false, and nothing kept, then.
	KeepNotification(ctx context.Context, scope, key string, items [][]byte) (bool, error)
	// TakeNotifications takes up to n of scope's pending items that are
	// due, oldest first, each due again after lease unless settled.
	// Items kept longer than Window ago are dropped.
	TakeNotifications(ctx context.Context, scope string, n int, lease time.Duration) ([]Kept, error)
	// SettleNotification ends a taken item's read: done drops it;
	// otherwise it is due again after retry.
	SettleNotification(ctx context.Context, scope, id string, done bool, retry time.Duration) error
}

// Kept is one pending item.
type Kept struct {
	// ID names the item in its scope.
	ID string
	// Item is what was kept: the adapter's own record of a read to make.
	Item []byte
	// At is when its notification was kept, on the store's clock.
	At time.Time
}

// Key is what a verified body is kept under: its digest. The same body
// posted again is the same key.
func Key(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// ErrBehind is a delivery whose reads are not all done when it must be
// answered, with no sync to read the rest: its vendor should send it
// again, and the redelivery reads on.
var ErrBehind = errors.New("the notification's reads are not done")

// Receiver keeps one system's notifications in its Inbox scope and reads
// them.
type Receiver struct {
	// Inbox keeps the items. Required.
	Inbox Inbox
	// Scope is the system's part of the inbox (its firm, system and
	// organisation): one receiver's items are read by it alone.
	Scope string
	// Read reads what items name, with when each was kept, in one go
	// where the vendor reads several records at once; it answers the
	// items it could not read yet (every item, when it names none but
	// fails), which are tried again later, and the first failure.
	Read func(ctx context.Context, items []Kept) (failed []string, err error)
	// Batch is how many items one Read is given at most; default 1.
	Batch int
	// Wake tells the system's sync, wherever it runs, that items are left
	// for it to read; nil when no sync reads them.
	Wake func(ctx context.Context) error
	// One, when set, lets one drain of the scope run at a time in this
	// process: the deliveries of a burst, each keeping its items, leave
	// them to the drain under way, which takes them in batches, rather
	// than each reading its own and spending the vendor's allowance a call
	// a record.
	One *One
	// Gather is how long a drain that found less than a batch due waits
	// for more of a burst before it reads them: a vendor that sends each
	// change at once in a body of its own (Xero) is read a batch a call
	// rather than a call a change. While each wait brings more (the burst
	// still arriving), the drain waits again, for GatherFor in all, so
	// that a burst is one call rather than a call and the rest a call
	// later, once the vendor's allowance lets it. Zero reads what is due
	// at once; nothing due is never waited for.
	Gather time.Duration
	// GatherFor bounds a drain's waits for the rest of a burst; at least
	// Gather.
	GatherFor time.Duration
}

// One is what lets one drain of a scope run at a time in this process.
// A drain asked for while another runs waits for it: the one under way
// goes round again for what was kept meanwhile, and the waiter returns
// once a round begun after it asked has found nothing left, or takes over
// when the one under way stops short.
type One struct {
	mu      sync.Mutex
	running bool
	asked   uint64        // drains asked for
	done    uint64        // the drains asked for up to this are done
	changed chan struct{} // closed when done or running changes
}

// begin counts a drain asked for and reports whether it is to run it.
func (o *One) begin() (my uint64, run bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.asked++
	if o.changed == nil {
		o.changed = make(chan struct{})
	}
	if !o.running {
		o.running = true
		return o.asked, true
	}
	return o.asked, false
}

// wait waits until the drain asked for as my is done (true) or nobody
// runs one (false: the caller is to run it now) or ctx ends.
func (o *One) wait(ctx context.Context, my uint64) (done bool, err error) {
	for {
		o.mu.Lock()
		if o.done >= my {
			o.mu.Unlock()
			return true, nil
		}
		if !o.running {
			o.running = true
			o.mu.Unlock()
			return false, nil
		}
		ch := o.changed
		o.mu.Unlock()
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-ch:
		}
	}
}

// round is where a round of the drain under way starts: it will see
// every item kept by the drains asked for up to target.
func (o *One) round() (target uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.asked
}

// finish ends a round: when it left nothing, the drains asked for up to
// target are done; stop says the drain goes no further, and again that
// more were asked for meanwhile, for the drain to go round again.
func (o *One) finish(target uint64, clean, stop bool) (again bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if clean && target > o.done {
		o.done = target
	}
	again = !stop && o.asked > target
	if !again {
		o.running = false
	}
	close(o.changed)
	o.changed = make(chan struct{})
	return again
}

// Lease is how long an item taken is not taken again while it is read;
// an instance killed mid-read leaves it to the next take after it.
const Lease = 30 * time.Second

// retryAfter is how long an item whose read failed waits.
const retryAfter = 5 * time.Second

// Receive keeps a verified body's items (unless the body was kept within
// the hour) and reads pending items until none is due or ctx ends; what
// is left is the sync's, which is woken: an item whose read failed too (a
// vendor down, a grant it refused until the firm reconnects), since the
// vendor's sending the body again would read nothing more than the sync
// does. It reports whether the body was a repeat, and an error (ErrBehind
// when the reads did not fail) when items are left and no sync reads them.
func (r Receiver) Receive(ctx context.Context, body []byte, items [][]byte) (repeat bool, err error) {
	// Kept before it is read, and whatever the delivery's deadline: an
	// item of a body acknowledged is never lost.
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	fresh, err := r.Inbox.KeepNotification(kctx, r.Scope, Key(body), items)
	cancel()
	if err != nil {
		return false, err
	}
	more, err := r.Drain(ctx)
	if err == nil && !more {
		return !fresh, nil
	}
	if r.Wake != nil {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if werr := r.Wake(wctx); werr == nil {
			return !fresh, nil
		} else if err == nil {
			err = werr
		}
	}
	if err == nil {
		err = ErrBehind
	}
	return !fresh, err
}

// Drain reads the scope's due items until none is left or ctx ends
// (then more is true). An item whose read fails is due again later; the
// first failure is returned after the rest were tried. With One set, a
// drain under way in this process is left to take them and waited for:
// it goes round until none is left, however many were kept meanwhile,
// and when it stops short the one waiting reads on itself (more is true
// when ctx ends first, for the sync to be woken).
func (r Receiver) Drain(ctx context.Context) (more bool, err error) {
	if r.One == nil {
		return r.drain(ctx)
	}
	my, run := r.One.begin()
	if !run {
		done, err := r.One.wait(ctx, my)
		if done {
			return false, nil
		}
		if err != nil {
			return true, nil // the drain under way has them yet
		}
	}
	for {
		target := r.One.round()
		more, err = r.drain(ctx)
		stop := err != nil || ctx.Err() != nil
		if !r.One.finish(target, !more && err == nil, stop) {
			return more, err
		}
	}
}

func (r Receiver) drain(ctx context.Context) (more bool, err error) {
	batch := max(r.Batch, 1)
	var first error
	for ctx.Err() == nil {
		taken, err := r.Inbox.TakeNotifications(ctx, r.Scope, batch, Lease)
		if err != nil {
			return true, errors.Join(first, err)
		}
		if len(taken) == 0 {
			return false, first
		}
		if r.Gather > 0 && len(taken) < batch {
			taken = r.gather(ctx, taken, batch)
		}
		failed, err := r.Read(ctx, taken)
		if err != nil && len(failed) == 0 {
			for _, k := range taken {
				failed = append(failed, k.ID)
			}
		}
		if err != nil && first == nil {
			first = err
		}
		if serr := r.settle(ctx, taken, failed); serr != nil {
			return true, errors.Join(first, serr)
		}
		if err != nil && ctx.Err() != nil {
			return true, first
		}
	}
	return true, first
}

// gather takes more of a burst to read with what was taken, less than
// a batch: it waits Gather and takes what came meanwhile, again while a
// wait brought more, until the batch is full, GatherFor has passed or ctx
// ends.
func (r Receiver) gather(ctx context.Context, taken []Kept, batch int) []Kept {
	until := time.Now().Add(max(r.GatherFor, r.Gather))
	for len(taken) < batch {
		select {
		case <-ctx.Done():
			return taken
		case <-time.After(min(r.Gather, max(time.Until(until), 0))):
		}
		rest, err := r.Inbox.TakeNotifications(ctx, r.Scope, batch-len(taken), Lease)
		if err != nil {
			return taken
		}
		taken = append(taken, rest...)
		if len(rest) == 0 || !time.Now().Before(until) {
			return taken
		}
	}
	return taken
}

// settle drops the items read and makes the failed ones due later (at
// once when ctx ended: they were cut short, not refused, and another
// instance may read them now).
func (r Receiver) settle(ctx context.Context, taken []Kept, failed []string) error {
	retry := retryAfter
	if ctx.Err() != nil {
		retry = 0
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	bad := map[string]bool{}
	for _, id := range failed {
		bad[id] = true
	}
	// At once, so that a store that commits in groups settles them in few.
	errs := make([]error, len(taken))
	var wg sync.WaitGroup
	for i, k := range taken {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.Inbox.SettleNotification(sctx, r.Scope, k.ID, !bad[k.ID], retry)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Limit keeps the first max items of distinct keys (a body may name the
// same record many times; it is read once), and says how many distinct
// ones it left out.
func Limit[T any, K comparable](items []T, key func(T) K, max int) (kept []T, over int) {
	seen := make(map[K]bool, len(items))
	for _, it := range items {
		k := key(it)
		if seen[k] {
			continue
		}
		seen[k] = true
		if len(kept) == max {
			over++
			continue
		}
		kept = append(kept, it)
	}
	return kept, over
}

// Each reads items with read, at most width at once, and answers the ids
// of those whose read failed, with the first failure: a Receiver's Read
// for a vendor that reads one record a call.
func Each(ctx context.Context, items []Kept, width int, read func(context.Context, Kept) error) (failed []string, first error) {
	errs := make([]error, len(items))
	sem := make(chan struct{}, max(width, 1))
	var wg sync.WaitGroup
	for i := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = read(ctx, items[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			failed = append(failed, items[i].ID)
			if first == nil {
				first = err
			}
		}
	}
	return failed, first
}
