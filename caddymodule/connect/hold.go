package connect

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/practicegw/practicegw/caddymodule/apierror"
)

// The steps that act on a vendor for one connection (a consent finished,
// a reconnect, a disconnect) and the connects of one firm's role are taken
// one at a time: each holds its name on this instance (holds) and, when
// the deps have locks, across instances (a lease). Versions alone would
// keep the record right but not the vendor side: a token a late callback
// seeds after a disconnect forgot it would outlive the connection.

// holdTTL bounds one held step; the vendor calls inside one are bounded
// well within it (exchangeTimeout, the upstream client's timeouts).
const holdTTL = 45 * time.Second

// holds are this instance's held names.
type holds struct {
	mu    sync.Mutex
	names map[string]chan struct{}
}

// slot is the one-place channel of name: held while it is full.
func (h *holds) slot(name string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.names == nil {
		h.names = map[string]chan struct{}{}
	}
	c, ok := h.names[name]
	if !ok {
		c = make(chan struct{}, 1)
		h.names[name] = c
	}
	return c
}

// hold takes name for one step and returns its release; a name another
// instance holds longer than a connect may wait is a 409 to retry.
func (m *Manager) hold(ctx context.Context, name string) (func(), error) {
	slot := m.holds.slot(name)
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	locks := m.d.Upstream.Locks
	if locks == nil {
		return func() { <-slot }, nil
	}
	name = "connect/" + name
	for tries := 0; ; tries++ {
		ok, err := locks.Lease(ctx, name, m.holder, holdTTL)
		if err != nil {
			<-slot
			return nil, fmt.Errorf("hold %s: %w", name, err)
		}
		if ok {
			return func() {
				// A release that fails leaves a lease that expires.
				_ = locks.Release(context.WithoutCancel(ctx), name, m.holder)
				<-slot
			}, nil
		}
		if tries == 400 {
			<-slot
			return nil, apierror.New(http.StatusConflict, "conflict",
				"Another change of this connection is in progress; try again in a moment.").WithHeader("Retry-After", "1")
		}
		t := time.NewTimer(25 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			<-slot
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
