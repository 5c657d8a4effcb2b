package xero

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/webhooksig"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// webhookPayload is Xero's WebhookEvent (xero-webhooks.openapi.yaml).
type webhookPayload struct {
	Events             []webhookEvent `json:"events"`
	FirstEventSequence int            `json:"firstEventSequence"`
	LastEventSequence  int            `json:"lastEventSequence"`
	Entropy            string         `json:"entropy"`
}

// Webhook is the ingest route for the Xero app's webhooks. Every request
// must carry x-xero-signature, the base64 HMAC-SHA256 of the raw body
// under Config.WebhookKey; one that does not gets 401 with an empty body.
// That is also Xero's intent-to-receive check: it sends correctly and
// incorrectly signed deliveries with no events and expects 200 and 401.
//
// The body's INVOICE events of this organisation are kept in the
// notification inbox and read: each invoice is read again from Xero
// (never from the event's resourceUrl; a hundred at a time, by their IDs),
// compared with the last state seen and published to sink when it
// differs, so an invoice paid in Xero becomes invoice.paid downstream. An
// UPDATE of an invoice never seen is only remembered (the read model's
// backfill has normally seen it first); a CREATE is published as new.
// Events of other organisations and categories are acknowledged and
// skipped. A body kept within the hour (a redelivery, or a capture posted
// again) is acknowledged without reading Xero again; one keeps each
// invoice it names once, at most Config.WebhookMaxRecords of them. The
// delivery reads for Config.WebhookTimeout, then is answered 200, and
// what is left is read by the sync within Xero's allowance. When the body
// cannot be kept the answer is 503 and Xero delivers again.
func (a *Adapter) Webhook(sink changes.ChangeSink) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		if !webhooksig.ValidHMAC([]byte(a.cfg.WebhookKey), body, r.Header.Get("x-xero-signature")) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var p webhookPayload
		if err := json.Unmarshal(body, &p); err != nil {
			// Signed by Xero yet unreadable: sending it again will not
			// help, so say it was received and log it.
			a.log.Error("xero webhook payload unreadable", zap.Error(err))
			w.WriteHeader(http.StatusOK)
			return
		}
		events := a.invoiceEvents(p)
		if len(events) == 0 {
			// Nothing to read (Xero's intent-to-receive check among
			// them): nothing to keep either.
			w.WriteHeader(http.StatusOK)
			return
		}
		items := make([][]byte, len(events))
		for i, e := range events {
			items[i], _ = json.Marshal(e)
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(a.cfg.WebhookTimeout))
		defer cancel()
		repeat, err := a.receiver(sink).Receive(ctx, body, items)
		switch {
		case err != nil:
			a.log.Error("xero webhook not processed; Xero will send it again", zap.Error(err))
			w.WriteHeader(http.StatusServiceUnavailable)
		case repeat:
			a.log.Info("xero webhook acknowledged unread: the same body was kept within the hour")
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
}

// ReadNotified reads what Xero's kept notifications name and are due,
// for the sync, which is woken when a delivery left some: more says some
// are left.
func (a *Adapter) ReadNotified(ctx context.Context) (more bool, err error) {
	return a.receiver(a.deps.Changes).Drain(ctx)
}

// gather is how long a read waits for more of a burst, and gatherFor
// how long in all while more still arrives: Xero sends each change at
// once, in a body of its own, and once the allowance's burst of six is
// spent (the sync's polls spend it) a call waits 1.1 s for the one
// before it, so a burst read in two calls waited that long for its
// second: 2 s and more to a hundred invoices' webhooks.
const (
	gather    = 50 * time.Millisecond
	gatherFor = 500 * time.Millisecond
)

// idsPerRead is how many invoices one read asks Xero for by their IDs:
// a hundred UUIDs are a URL of under 4 KB, and Xero's allowance is a call
// a second once its burst is spent.
const idsPerRead = 100

// receiver keeps Xero's notifications in the organisation's scope and
// reads them into sink, a hundred invoices a call.
func (a *Adapter) receiver(sink changes.ChangeSink) notifications.Receiver {
	return notifications.Receiver{Inbox: a.inbox, Scope: "xero/" + a.cfg.Firm + "/" + a.cfg.TenantID, Batch: idsPerRead, Wake: a.deps.Wake, One: &a.one, Gather: gather, GatherFor: gatherFor,
		Read: func(ctx context.Context, items []notifications.Kept) ([]string, error) {
			return nil, a.ingestAll(ctx, sink, items)
		}}
}

// webhookEvent is one event of a Xero webhook body.
type webhookEvent struct {
	ResourceURL   string `json:"resourceUrl"`
	ResourceID    string `json:"resourceId"`
	EventDateUTC  string `json:"eventDateUtc"`
	EventType     string `json:"eventType"`
	EventCategory string `json:"eventCategory"`
	TenantID      string `json:"tenantId"`
	TenantType    string `json:"tenantType"`
}

// invoiceEvents are the body's events about this organisation's invoices,
// one per invoice, up to the bound.
func (a *Adapter) invoiceEvents(p webhookPayload) []webhookEvent {
	var mine []webhookEvent
	for _, e := range p.Events {
		if e.EventCategory == "INVOICE" && e.TenantID == a.cfg.TenantID {
			mine = append(mine, e)
		}
	}
	kept, over := notifications.Limit(mine, func(e webhookEvent) string { return e.ResourceID }, a.cfg.WebhookMaxRecords)
	if over > 0 {
		a.log.Warn("xero webhook names more invoices than one delivery may read; the sync will find the rest",
			zap.Int("read", len(kept)), zap.Int("left", over))
	}
	return kept
}

// ingestAll reads the invoices the items name in one call, by their IDs,
// and records each.
func (a *Adapter) ingestAll(ctx context.Context, sink changes.ChangeSink, items []notifications.Kept) error {
	events := map[string]webhookEvent{}
	heard := map[string]time.Time{}
	var ids []string
	for _, k := range items {
		var e webhookEvent
		if json.Unmarshal(k.Item, &e) != nil || !isUUID(e.ResourceID) {
			continue
		}
		if prev, ok := events[e.ResourceID]; ok {
			if prev.EventType == "CREATE" {
				e.EventType = "CREATE" // a creation told stays told
			}
		} else {
			ids = append(ids, e.ResourceID)
		}
		events[e.ResourceID], heard[e.ResourceID] = e, k.At
	}
	if len(ids) == 0 {
		return nil
	}
	invs, err := a.readInvoices(ctx, ids)
	if err != nil {
		return err
	}
	t := practice.Tenant{Firm: a.cfg.Firm}
	// Compared a few at once: their change records and states share the
	// stores' commits.
	return paging.Parallel(ctx, observeWidth, len(invs), func(ctx context.Context, i int) error {
		inv := &invs[i]
		e, ok := events[inv.InvoiceID]
		if !ok || inv.Type != "ACCREC" {
			return nil // a bill, or an invoice nobody asked for
		}
		after, err := a.invoiceJSON(ctx, t, inv)
		if err != nil {
			return err
		}
		at, _ := xeroTime(e.EventDateUTC)
		published, err := a.rec.Observe(ctx, sink, changes.Observation{
			Tenant: t, Kind: practice.Invoices, ResourceID: "inv_" + inv.InvoiceID, After: after, Created: e.EventType == "CREATE",
			Version: inv.UpdatedDateUTC, OccurredAt: at,
		})
		if err != nil {
			return fmt.Errorf("xero: record invoice %s: %w", inv.InvoiceID, err)
		}
		if published && a.deps.Heard != nil {
			a.deps.Heard(heard[inv.InvoiceID])
		}
		return nil
	})
}

// observeWidth is how many invoices a notification's read compares at
// once. It costs no vendor call: what bounds a burst's comparing is the
// store's commits (a bbolt commit's fsyncs cost the same whatever it
// holds), so the more at once, the fewer commits a burst waits for: eight
// at once kept a hundred invoices' webhooks a second and more behind
// their read on a loaded machine.
const observeWidth = 32

// Notifies reports whether Xero tells the kind's changes: invoices, with
// the app's webhook key to check them with; quotes never.
func (a *Adapter) Notifies(k practice.Kind) bool {
	return k == practice.Invoices && a.cfg.WebhookKey != ""
}
