package practice

import (
	"context"
	"sync/atomic"
)

type linksLater struct{}

// Later counts what a first read left for later: a record's link to
// another system of the firm (a ledger's customer to the records
// system's client) that the other system could not answer at once,
// its own allowance spent by its own sync. The record is kept without
// the link, and the reader reads it again once the first read ends.
type Later struct{ n atomic.Int64 }

// LinksLater marks ctx's reads as a first read of records, which may
// leave what another system must answer for later rather than wait for
// that system's allowance: one vendor's budget spent by its own sync
// must not hold up another vendor's backfill.
func LinksLater(ctx context.Context) (context.Context, *Later) {
	l := &Later{}
	return context.WithValue(ctx, linksLater{}, l), l
}

// LaterOf is what ctx's reads may leave for later, nil when they must
// wait for every answer (a poll, a reconciliation, a client's read).
func LaterOf(ctx context.Context) *Later {
	l, _ := ctx.Value(linksLater{}).(*Later)
	return l
}

// Leave notes one answer left for later.
func (l *Later) Leave() { l.n.Add(1) }

// Left is how many answers were left for later.
func (l *Later) Left() int { return int(l.n.Load()) }
