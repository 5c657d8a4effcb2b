package dispatcher

// Kick wakes the delivery loop, as the injected clock's tests need after
// moving time forward: the loop's timer runs on real time.
func (e *Engine) Kick() { e.wake() }
