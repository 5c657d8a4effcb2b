package xero

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/notifications"
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
// For each INVOICE event of this organisation the invoice is read again
// from Xero (never from the event's resourceUrl), compared with the last
// state seen and published to sink when it differs, so an invoice paid in
// Xero becomes invoice.paid downstream. An UPDATE of an invoice never
// seen is only remembered (the read model's backfill has normally seen
// it first); a CREATE is published as new.
// Events of other organisations and categories are acknowledged and
// skipped. A body handled within the hour (a redelivery, or a capture
// posted again) is acknowledged without reading Xero again; one delivery
// reads each invoice it names once, at most Config.WebhookMaxRecords of
// them, within Config.WebhookTimeout. When Xero or the sink fails, or time
// runs out, the answer is 503 and Xero delivers again.
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
			// them): nothing to remember either.
			w.WriteHeader(http.StatusOK)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(a.cfg.WebhookTimeout))
		defer cancel()
		repeat, err := a.notices.Once(ctx, "xero/"+a.cfg.Firm, body, func(ctx context.Context) error {
			for _, e := range events {
				if err := a.ingest(ctx, sink, e.ResourceID, e.EventDateUTC, e.EventType == "CREATE"); err != nil {
					return fmt.Errorf("invoice %s: %w", e.ResourceID, err)
				}
			}
			return nil
		})
		switch {
		case err != nil:
			a.log.Error("xero webhook not processed; Xero will send it again", zap.Error(err))
			w.WriteHeader(http.StatusServiceUnavailable)
		case repeat:
			a.log.Info("xero webhook acknowledged unread: the same body was handled within the hour")
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
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

func (a *Adapter) ingest(ctx context.Context, sink changes.ChangeSink, invID, eventDate string, created bool) error {
	if !isUUID(invID) {
		return nil
	}
	inv, err := a.readInvoice(ctx, invID)
	if errors.Is(err, practice.ErrNotFound) {
		return nil // a bill, or gone
	}
	if err != nil {
		return err
	}
	t := practice.Tenant{Firm: a.cfg.Firm}
	after, err := a.invoiceJSON(ctx, t, &inv)
	if err != nil {
		return err
	}
	at, _ := xeroTime(eventDate)
	_, err = a.rec.Observe(ctx, sink, changes.Observation{
		Tenant: t, Kind: practice.Invoices, ResourceID: "inv_" + invID, After: after, Created: created,
		Version: inv.UpdatedDateUTC, OccurredAt: at,
	})
	if err != nil {
		return fmt.Errorf("xero: record invoice %s: %w", invID, err)
	}
	return nil
}
