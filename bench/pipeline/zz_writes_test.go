package main

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestWriteRate(t *testing.T) {
	g, err := openGatewayDB()
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	ctx := context.Background()
	for _, w := range []int{1, 16} {
		n := 3000
		start := time.Now()
		var wg sync.WaitGroup
		ch := make(chan struct{}, n)
		for range n {
			ch <- struct{}{}
		}
		close(ch)
		for range w {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range ch {
					if _, err := g.create(ctx, "x"); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		t.Logf("%d writers: %.0f writes/s", w, float64(n)/time.Since(start).Seconds())
	}
}
