package vendortest

import (
	"time"
)

// Intuit tells the app's endpoint of a company's changes in batches: the
// changes of a period (a minute, as Intuit batches them) go out together
// when it ends, in one signed CloudEvents body. NotifyEvery turns it on.

// NotifyEvery makes the double tell url of every change to the
// company's invoices, payments and estimates as Intuit does: the changes
// of each period (Intuit's is a minute) in one signed CloudEvents body
// when the period ends. Zero stops telling. Close stops it.
func (q *QuickBooks) NotifyEvery(url string, period time.Duration) {
	q.mu.Lock()
	q.notifyURL, q.period = url, period
	start := q.push == nil && period > 0
	q.mu.Unlock()
	if start {
		p := startPusher(q.tellDue)
		q.mu.Lock()
		q.push = p
		q.mu.Unlock()
		p.poke()
	}
}

// FlushNotifications tells every change waiting, at once.
func (q *QuickBooks) FlushNotifications() { q.tell() }

// told notes a change for NotifyEvery; q.mu is held.
func (q *QuickBooks) told(entity, id, operation string, at time.Time) {
	if q.period <= 0 {
		return
	}
	q.batch = append(q.batch, QBEvent{Entity: entity, ID: id, Operation: operation, At: at})
}

// tellDue sends the batch of the period that has ended, and answers when
// the next one ends.
func (q *QuickBooks) tellDue(now time.Time) time.Time {
	q.mu.Lock()
	period := q.period
	q.mu.Unlock()
	if period <= 0 {
		return time.Time{}
	}
	q.tell()
	return now.Truncate(period).Add(period)
}

// tell sends the batch waiting, if any.
func (q *QuickBooks) tell() {
	q.mu.Lock()
	batch, url := q.batch, q.notifyURL
	q.batch = nil
	q.mu.Unlock()
	if len(batch) == 0 || url == "" {
		return
	}
	// Intuit retries a delivery that fails; the double sends once, and a
	// test reads what its receiver answered in the logs it keeps.
	_, _ = q.Notify(url, QuickBooksCloudEvents(q.RealmID, batch...))
}
