package dispatcher_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	boltstore "github.com/practicegw/practicegw/store/bolt"
)

// BenchmarkIngestToDelivery measures the embedded pipeline end to end, from
// Ingest to a receiver's handler, over a real bbolt file (fsync on every
// commit) and a loopback HTTP receiver.
//
// serial ingests one change and waits for its delivery: the latency a
// single change sees. burst puts b.N changes in an outbox that DrainOutbox
// feeds in batches, as the embedded gateway does: throughput, and latency
// under queueing.
func BenchmarkIngestToDelivery(b *testing.B) {
	b.Run("serial", func(b *testing.B) { benchPipeline(b, true) })
	b.Run("burst", func(b *testing.B) { benchPipeline(b, false) })
}

func benchPipeline(b *testing.B, serial bool) {
	db := openDB(b)
	secrets, _ := sealed.Random()
	st, err := boltstore.New(db, nil, boltstore.WithSecrets(secrets))
	if err != nil {
		b.Fatal(err)
	}
	eng, err := dispatcher.New(dispatcher.Config{AllowCIDRs: loopbackOnly()}, st.Backends())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		eng.Close()
	}()

	var (
		mu        sync.Mutex
		started   = map[string]time.Time{}
		latencies []time.Duration
		arrived   = make(chan struct{}, 1<<16)
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		mu.Lock()
		if t0, ok := started[r.Header.Get("webhook-id")]; ok {
			latencies = append(latencies, now.Sub(t0))
		}
		mu.Unlock()
		arrived <- struct{}{}
	}))
	defer srv.Close()
	tenant := practice.Tenant{Firm: "frm_bench"}
	if _, _, err := eng.CreateEndpoint(ctx, tenant, dispatcher.EndpointInput{URL: srv.URL, Events: []string{"*"}}); err != nil {
		b.Fatal(err)
	}

	changes := make([]practice.Change, b.N)
	ids := make([]string, b.N)
	for i := range changes {
		changes[i] = clientChange(tenant)
		evs, _ := dispatcher.Derive(changes[i])
		ids[i] = evs[0].ID
	}

	ob := newOutbox()
	drained := make(chan error, 1)
	go func() { drained <- eng.DrainOutbox(ctx, ob) }()
	defer func() {
		cancel()
		<-drained
	}()

	b.ResetTimer()
	begin := time.Now()
	for i, c := range changes {
		mu.Lock()
		started[ids[i]] = time.Now()
		mu.Unlock()
		if !serial {
			ob.add(c)
			continue
		}
		if err := eng.Ingest(ctx, c); err != nil {
			b.Fatal(err)
		}
		<-arrived
	}
	if !serial {
		for range b.N {
			<-arrived
		}
	}
	elapsed := time.Since(begin)
	b.StopTimer()

	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
}
