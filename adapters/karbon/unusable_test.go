package karbon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
)

// billingSync is Karbon's billing synced as the firm's ledger, as the
// gateway runs it: the adapter, the model and its one sync on clock,
// with the change records it raises.
type billingSync struct {
	a     *karbon.Adapter
	model *readmodel.Model
	sync  *readmodel.Syncer
	sink  *sink
	clock *vendortest.Clock
}

func newBillingSync(t *testing.T, k *vendortest.Karbon, clock *vendortest.Clock) *billingSync {
	t.Helper()
	store := readmodelsim.NewStore(clock.Now)
	b := &billingSync{model: readmodel.New(readmodel.Config{Firm: live.Firm, Store: store}), sink: &sink{}, clock: clock}
	t.Cleanup(b.model.Close)
	rec := &changes.Recorder{State: b.model}
	b.a = ledgerAdapter(t, k, func(_ *karbonConfig, d *upstream.Deps) {
		d.Clock, d.State, d.Recorder, d.Changes = clock, b.model, rec, b.sink
	})
	b.model.Serve(practice.Invoices, b.a)
	b.sync = readmodel.NewSyncer(readmodel.SyncedSystem{Role: "ledger", System: "karbon", Label: "Karbon", Kinds: []practice.Kind{practice.Invoices}, Reader: b.a},
		readmodel.SyncDeps{Model: b.model, Recorder: rec, Sink: b.sink, Checkpoints: store, Leases: store, Holder: "one"},
		readmodel.SyncConfig{Poll: time.Minute, Reconcile: 24 * time.Hour, LeaseTTL: 30 * time.Second}, readmodel.WithClock(clock.Now))
	return b
}

// round lets d pass, then runs the sync until it has nothing more to do.
func (b *billingSync) round(d time.Duration) {
	b.clock.Advance(d)
	for range 100 {
		if _, more := b.sync.Tick(context.Background()); !more {
			return
		}
	}
}

func (b *billingSync) invoice(t *testing.T, id string) (practice.Invoice, error) {
	t.Helper()
	raw, err := b.model.Get(context.Background(), live, practice.Invoices, id)
	var inv practice.Invoice
	if err == nil {
		err = json.Unmarshal(raw, &inv)
	}
	return inv, err
}

func (b *billingSync) changesOf(id string) []practice.Change {
	var out []practice.Change
	for _, c := range b.sink.all() {
		if c.ResourceID == id {
			out = append(out, c)
		}
	}
	return out
}

// TestAPaymentKarbonCannotAnswerStallsNothingElse is the known case: a
// paid invoice whose payment answers 404 at /v3/Payments/{key}. The
// invoice cannot be told settled how, so it is served as last known (or
// not at all, when never read), and the sync's status says so, while
// everything else of its kind goes on: the backfill and the polls keep
// every other invoice, an Invoice webhook that names it is answered and
// the rest of the delivery read, a webhook of another invoice raises its
// change, and the reconciliation removes an invoice deleted meanwhile
// without removing the unusable one (a payment's 404 is no invoice's); a
// webhook whose read Karbon fails removes nothing either.
// Each poll asks for it again, a few records at a time, never a read;
// once Karbon answers for its payment, it is kept paid and raised.
func TestAPaymentKarbonCannotAnswerStallsNothingElse(t *testing.T) {
	k := fixture(t)
	billing(t, k)
	clock := vendortest.NewClock(epoch.Add(24 * time.Hour))
	k.SetNow(clock.Now)
	paid := func(key string) string {
		return k.PayInvoice(vendortest.KarbonInvoicePayment{InvoiceKey: key, PaymentMethod: "Bank Transfer", Amount: "1200.00",
			PaymentDate: epoch.AddDate(0, 1, 0)})
	}
	// Never read: paid, with its payment lost, before the first sync.
	never := paid("I0020")
	k.LosePayment(never, true)
	b := newBillingSync(t, k, clock)
	b.round(0)
	st := b.sync.Status()
	if st.State != readmodel.StateLive || len(st.Unusable) != 1 || st.Unusable[0].ID != "inv_I0020" ||
		!strings.Contains(st.Unusable[0].Reason, "404 for its payment") || st.Kinds[0].Unusable != 1 {
		t.Fatalf("after the backfill: %s %q, unusable %+v", st.State, st.Why, st.Unusable)
	}
	held := b.model.Count(practice.Invoices)
	if all := len(vendortest.ListAll(t, ledgerAdapter(t, k), live, practice.Invoices, practice.Filter{}, 200)); held != all {
		t.Fatalf("the copy holds %d invoices, Karbon lists %d usable ones", held, all)
	}
	if _, err := b.invoice(t, "inv_I0020"); err == nil {
		t.Fatal("an invoice never usable is served")
	}

	// Held as issued, then paid with its payment lost: served as last
	// known, while the poll keeps the others' changes.
	lost := paid("I0021")
	k.LosePayment(lost, true)
	paid("I0022")
	b.round(2 * time.Minute)
	if inv, err := b.invoice(t, "inv_I0021"); err != nil || inv.Status != "issued" {
		t.Fatalf("an invoice whose payment is lost: %+v %v, want it as last known", inv, err)
	}
	if inv, err := b.invoice(t, "inv_I0022"); err != nil || inv.Status != "paid" || len(b.changesOf("inv_I0022")) != 1 {
		t.Fatalf("the poll's other invoice: %+v %v, %d changes", inv, err, len(b.changesOf("inv_I0022")))
	}
	if st := b.sync.Status(); st.State != readmodel.StateLive || len(st.Unusable) != 2 {
		t.Fatalf("after the poll: %s %q, unusable %+v", st.State, st.Why, st.Unusable)
	}

	// Its webhook is answered and the rest of the delivery read; it is
	// not taken for deleted.
	paid("I0023")
	h := b.a.Webhook(b.sink)
	key := "karbon-signing-key-0001"
	body := []byte("[" + string(vendortest.KarbonWebhook("Invoice", "I0021", "Updated", clock.Now())) + "," +
		string(vendortest.KarbonWebhook("Invoice", "I0023", "Updated", clock.Now())) + "]")
	if code := deliver(h, body, vendortest.SignKarbon(key, body)); code != http.StatusOK {
		t.Fatalf("a delivery naming the unusable invoice answered %d", code)
	}
	if inv, err := b.invoice(t, "inv_I0023"); err != nil || inv.Status != "paid" {
		t.Fatalf("the delivery's other invoice: %+v %v", inv, err)
	}
	if c := b.changesOf("inv_I0021"); len(c) != 0 {
		t.Fatalf("the unusable invoice's webhook raised %+v", c)
	}

	// A webhook whose read Karbon fails is no removal: Karbon is asked to
	// send it again.
	k.FaultOn("/v3/Invoices/I0024", vendortest.Fault{Status: http.StatusServiceUnavailable}, vendortest.Fault{Status: http.StatusServiceUnavailable},
		vendortest.Fault{Status: http.StatusServiceUnavailable}, vendortest.Fault{Status: http.StatusServiceUnavailable})
	body = vendortest.KarbonWebhook("Invoice", "I0024", "Updated", clock.Now())
	if code := deliver(h, body, vendortest.SignKarbon(key, body)); code != http.StatusServiceUnavailable || len(b.changesOf("inv_I0024")) != 0 {
		t.Fatalf("a webhook whose read Karbon fails: %d, changes %+v", code, b.changesOf("inv_I0024"))
	}
	if inv, err := b.invoice(t, "inv_I0024"); err != nil || inv.Status != "issued" {
		t.Fatalf("the invoice whose webhook read failed: %+v %v", inv, err)
	}

	// The reconciliation removes what Karbon deleted, and keeps it.
	k.RemoveInvoice("I0030")
	if err := b.sync.Resync(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.round(time.Second)
	if _, err := b.invoice(t, "inv_I0030"); err == nil {
		t.Fatal("the reconciliation kept a deleted invoice")
	}
	if c := b.changesOf("inv_I0030"); len(c) != 1 || string(c[0].After) != "null" {
		t.Fatalf("the removal's change records: %+v", c)
	}
	if inv, err := b.invoice(t, "inv_I0021"); err != nil || inv.Status != "issued" || len(b.changesOf("inv_I0021")) != 0 {
		t.Fatalf("the reconciliation and the unusable invoice: %+v %v", inv, err)
	}

	// Asked for again at each poll, not at each read.
	reads := func() int {
		n := 0
		for _, r := range k.Requests() {
			if strings.Contains(r, "/v3/Payments/"+lost) {
				n++
			}
		}
		return n
	}
	before := reads()
	for range 30 {
		if _, err := b.invoice(t, "inv_I0021"); err != nil {
			t.Fatal(err)
		}
	}
	if reads() != before {
		t.Fatalf("30 reads of the unusable invoice asked Karbon for its payment %d times", reads()-before)
	}
	b.round(2 * time.Minute)
	if reads() != before+1 {
		t.Fatalf("a poll asked for its payment %d times, want once", reads()-before)
	}

	// Karbon answers again: kept paid, its change raised once, and the
	// status names nothing.
	k.LosePayment(lost, false)
	k.LosePayment(never, false)
	b.round(2 * time.Minute)
	for _, id := range []string{"inv_I0020", "inv_I0021"} {
		if inv, err := b.invoice(t, id); err != nil || inv.Status != "paid" || inv.SettledVia != "bank_transfer" {
			t.Fatalf("%s once its payment reads: %+v %v", id, inv, err)
		}
	}
	if c := b.changesOf("inv_I0021"); len(c) != 1 {
		t.Fatalf("%d change records of the invoice once usable, want 1", len(c))
	}
	if st := b.sync.Status(); len(st.Unusable) != 0 || st.Kinds[0].Unusable != 0 {
		t.Fatalf("the status still names %+v", st.Unusable)
	}
}
