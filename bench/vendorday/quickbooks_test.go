package vendorday

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/quickbooks"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice/changes"
)

// QuickBooks Online meters reads rather than refusing them past a daily
// figure: its published limits are 500 a minute and 10 a second per
// company, and the gateway plans its polls within 2,000 reads a day
// (quickbooks.DailyReads), half of which is the target for an idle
// company.
const qboIdleTarget = 1000

// qboDay runs a firm on QuickBooks Online for 24 hours of the bubble's
// clock with the default configuration: its sync, and, when changesPerHour
// is set, a bookkeeper changing that many invoices and estimates an hour
// (every other change a payment, every tenth an estimate accepted) with Intuit's webhooks batched every three minutes.
// It returns the calls by the minute and by the second.
func qboDay(t *testing.T, s size, changesPerHour int) (minutes, seconds map[int64]int) {
	// The double's server runs outside the bubble: its listener is no
	// wait the bubble's clock can skip. Requests reach its handler
	// through Serve, in the caller's goroutine.
	q := vendortest.NewQuickBooks()
	defer q.Close()
	for i := 1; i <= s.invoices; i++ {
		q.AddInvoice(vendortest.QBInvoice{ID: fmt.Sprint(i), DocNumber: fmt.Sprintf("%05d", i),
			CustomerID: fmt.Sprint(1 + i%s.clients), CustomerName: fmt.Sprintf("Client %05d", i%s.clients),
			TxnDate: epoch, DueDate: epoch.AddDate(0, 1, 0), Total: "1200.00", Updated: epoch})
	}
	// A proposal for every tenth invoice, as the firm's engagements: the
	// firm keeps no other system of proposals.
	for i := 1; i <= s.invoices/10; i++ {
		q.AddEstimate(vendortest.QBEstimate{ID: fmt.Sprint(i), DocNumber: fmt.Sprintf("E%05d", i),
			CustomerID: fmt.Sprint(1 + i%s.clients), CustomerName: fmt.Sprintf("Client %05d", i%s.clients),
			TxnDate: epoch, Lines: []string{"Year-end accounts"}, Total: "2400.00", Updated: epoch})
	}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		minutes, seconds = map[int64]int{}, map[int64]int{}
		var mu sync.Mutex
		q.SetNow(time.Now)
		h := host(q.URL)
		serve := vendortest.Serve{Hosts: map[string]http.Handler{h: q.Handler()}, Observe: func(_ string, r *http.Request) {
			if !strings.HasPrefix(r.URL.Path, "/v3/") {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			minutes[int64(time.Since(start)/time.Minute)]++
			seconds[int64(time.Since(start)/time.Second)]++
		}}
		// The firm's recorder, on the model syncs makes: the webhooks
		// compare with what the sync has read.
		rec := &changes.Recorder{}
		deps := upstream.Deps{Budget: upstream.NewLocalBudget(nil), Clock: upstream.SystemClock{}, Transport: serve, Recorder: rec}
		a, err := quickbooks.New(quickbooks.Config{Firm: "frm_bench", RealmID: q.RealmID, BaseURL: q.URL,
			VerifierToken: q.VerifierToken, OAuth2: upstream.OAuth2Config{AccessToken: q.Token}}, deps)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, sy := range syncsRecording(t, "frm_bench", []system{{"ledger", a, a.Upstream(), true}}, rec) {
			wg.Go(func() { sy.Run(ctx) })
		}
		if changesPerHour > 0 {
			wg.Go(func() { bookkeeper(ctx, q, a, s.invoices, changesPerHour) })
		}
		time.Sleep(24 * time.Hour)
		cancel()
		wg.Wait()
	})
	return minutes, seconds
}

// bookkeeper changes invoices at a steady rate and delivers Intuit's
// batched webhooks for them.
func bookkeeper(ctx context.Context, q *vendortest.QuickBooks, a *quickbooks.Adapter, invoices, perHour int) {
	every := time.Hour / time.Duration(perHour)
	const batch = 3 * time.Minute
	var pending []vendortest.QBEvent
	next := 1
	lastSent := time.Now()
	hook := a.Webhook(discard{})
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		now := time.Now()
		id := fmt.Sprint(next)
		if est := fmt.Sprint(1 + n/10%max(invoices/10, 1)); n%10 == 9 {
			// Now and then a client accepts an estimate.
			q.SetEstimateStatus(est, "Accepted", now)
			pending = append(pending, vendortest.QBEvent{Entity: "Estimate", ID: est, Operation: "Update", At: now})
		} else if n%2 == 0 {
			q.Change(id, fmt.Sprintf("%d.00", 1200+n%50), now)
			pending = append(pending, vendortest.QBEvent{Entity: "Invoice", ID: id, Operation: "Update", At: now})
		} else {
			pid := q.Pay(id, "Visa", "", now)
			pending = append(pending, vendortest.QBEvent{Entity: "Payment", ID: pid, Operation: "Create", At: now},
				vendortest.QBEvent{Entity: "Invoice", ID: id, Operation: "Update", At: now})
			next = next%invoices + 1
		}
		if now.Sub(lastSent) >= batch {
			body := vendortest.QuickBooksCloudEvents(q.RealmID, pending...)
			req := httptest.NewRequest(http.MethodPost, "/ingest/frm_bench/quickbooks", strings.NewReader(string(body)))
			req.Header.Set("intuit-signature", vendortest.SignQuickBooks(q.VerifierToken, body))
			hook.ServeHTTP(httptest.NewRecorder(), req)
			pending, lastSent = nil, now
		}
	}
}

func TestADayOfQuickBooksCalls(t *testing.T) {
	if os.Getenv("PRACTICEGW_BENCH_VENDORDAY") == "" {
		t.Skip("a benchmark of minutes: bench/vendorday.sh runs it")
	}
	fmt.Printf("%-44s %9s %9s %10s %8s %9s %8s\n", "firm on QuickBooks Online", "calls/day", "target", "peak/min", "limit", "peak/sec", "limit")
	ss := sizes
	if testing.Short() {
		ss = ss[:1]
	}
	for _, s := range ss {
		for _, perHour := range []int{0, 200} {
			minutes, seconds := qboDay(t, s, perHour)
			total, peakMin, peakSec := 0, 0, 0
			for _, n := range minutes {
				total += n
				peakMin = max(peakMin, n)
			}
			for _, n := range seconds {
				peakSec = max(peakSec, n)
			}
			name := fmt.Sprintf("%s (%d invoices), idle", s.name, s.invoices)
			target := fmt.Sprint(qboIdleTarget)
			if perHour > 0 {
				name = fmt.Sprintf("%s (%d invoices), %d changes/hour", s.name, s.invoices, perHour)
				target = "-"
			}
			fmt.Printf("%-44s %9d %9s %10d %8d %9d %8d\n", name, total, target, peakMin, 500, peakSec, 10)
			if perHour == 0 && total > qboIdleTarget {
				t.Errorf("%s: %d calls in a day, over %d", name, total, qboIdleTarget)
			}
			if peakMin > 500 || peakSec > 10 {
				t.Errorf("%s: %d calls in one minute, %d in one second, over 500 and 10", name, peakMin, peakSec)
			}
		}
	}
}
