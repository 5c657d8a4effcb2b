package upstream

import (
	"context"
	"sync"
)

// Parallel runs fn for 0..n-1 with at most width at a time and returns the
// first error, cancelling the rest. Its goroutines end before it returns.
// Adapters use it for detail reads that a vendor's list does not inline.
func Parallel(ctx context.Context, width, n int, fn func(ctx context.Context, i int) error) error {
	if n == 0 {
		return nil
	}
	width = min(max(width, 1), n)
	if width == 1 {
		for i := range n {
			if err := fn(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  = make(chan int)
	)
	for range width {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return first
}
