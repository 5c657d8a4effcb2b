package vendortest

import (
	"net/http"
	"sync"
	"time"
)

// pusher sends a vendor's notifications from a goroutine the double owns,
// so that a change made under the double's lock never waits on the
// receiver. send delivers what is due and answers when it should run
// next (zero: when poked).
type pusher struct {
	send func(now time.Time) (next time.Time)
	kick chan struct{}
	quit chan struct{}
	wg   sync.WaitGroup
}

func startPusher(send func(now time.Time) time.Time) *pusher {
	p := &pusher{send: send, kick: make(chan struct{}, 1), quit: make(chan struct{})}
	p.wg.Add(1)
	go p.run()
	return p
}

func (p *pusher) run() {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-p.kick:
		case <-timer.C:
		}
		next := p.send(time.Now())
		timer.Stop()
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		timer.Reset(wait)
	}
}

// poke makes the pusher look at once.
func (p *pusher) poke() {
	if p == nil {
		return
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// stop ends the pusher and waits for a send under way.
func (p *pusher) stop() {
	if p == nil {
		return
	}
	close(p.quit)
	p.wg.Wait()
}

// pushClient is how the doubles deliver notifications: a receiver that
// does not answer within its vendor's time is a failed delivery.
var pushClient = &http.Client{Timeout: 10 * time.Second}
