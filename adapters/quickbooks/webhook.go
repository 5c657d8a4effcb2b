package quickbooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/adapters/kit/webhooksig"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// Event is one entity change a QuickBooks webhook names, in either of
// Intuit's formats.
type Event struct {
	// Realm is the company (intuitaccountid, realmId).
	Realm string
	// Entity is the entity's name in lower case ("invoice", "payment").
	Entity string
	ID     string
	// Operation is the change in lower case: created, updated, deleted,
	// voided, merged, emailed.
	Operation string
	At        time.Time
}

// cloudEvent is one event of the CloudEvents body (a JSON array).
type cloudEvent struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Time            string          `json:"time"`
	IntuitEntityID  string          `json:"intuitentityid"`
	IntuitAccountID string          `json:"intuitaccountid"`
	Data            json.RawMessage `json:"data"`
}

// legacyBody is the eventNotifications body.
type legacyBody struct {
	EventNotifications []struct {
		RealmID         string `json:"realmId"`
		DataChangeEvent struct {
			Entities []struct {
				Name        string `json:"name"`
				ID          string `json:"id"`
				Operation   string `json:"operation"`
				LastUpdated string `json:"lastUpdated"`
			} `json:"entities"`
		} `json:"dataChangeEvent"`
	} `json:"eventNotifications"`
}

// legacyOperations turn the legacy body's operations into the
// CloudEvents' words.
var legacyOperations = map[string]string{"Create": "created", "Update": "updated", "Delete": "deleted",
	"Merge": "merged", "Void": "voided", "Emailed": "emailed"}

// ParseEvents reads a webhook body of either format: a CloudEvents array
// (type qbo.<entity>.<operation>.v1) or the legacy eventNotifications
// object. One body may name several companies.
func ParseEvents(body []byte) ([]Event, error) {
	trimmed := strings.TrimSpace(string(body))
	if strings.HasPrefix(trimmed, "[") {
		var ces []cloudEvent
		if err := json.Unmarshal(body, &ces); err != nil {
			return nil, fmt.Errorf("quickbooks webhook: %w", err)
		}
		out := make([]Event, 0, len(ces))
		for _, e := range ces {
			parts := strings.Split(e.Type, ".")
			if len(parts) != 4 || parts[0] != "qbo" {
				continue // a type of another kind: nothing to read
			}
			at, _ := qbTime(e.Time)
			out = append(out, Event{Realm: e.IntuitAccountID, Entity: strings.ToLower(parts[1]), ID: e.IntuitEntityID,
				Operation: strings.ToLower(parts[2]), At: at})
		}
		return out, nil
	}
	var lb legacyBody
	if err := json.Unmarshal(body, &lb); err != nil {
		return nil, fmt.Errorf("quickbooks webhook: %w", err)
	}
	var out []Event
	for _, n := range lb.EventNotifications {
		for _, e := range n.DataChangeEvent.Entities {
			at, _ := qbTime(e.LastUpdated)
			op := legacyOperations[e.Operation]
			if op == "" {
				op = strings.ToLower(e.Operation)
			}
			out = append(out, Event{Realm: n.RealmID, Entity: strings.ToLower(e.Name), ID: e.ID, Operation: op, At: at})
		}
	}
	return out, nil
}

// Verified reports whether body carries Intuit's signature under the
// app's verifier token: intuit-signature, the base64 HMAC-SHA256 of the
// raw body.
func Verified(verifierToken string, r *http.Request, body []byte) bool {
	return webhooksig.ValidHMAC([]byte(verifierToken), body, r.Header.Get("intuit-signature"))
}

// Webhook is the ingest route for the app's webhooks. Every request must
// carry intuit-signature, checked before anything of the body is read;
// one that does not gets 401 with an empty body.
//
// Each invoice and estimate the body names for this company is read
// again from QuickBooks (GET .../invoice/{id}, .../estimate/{id}),
// compared with the last state seen
// and published to sink when it differs; a payment is read, and each
// invoice it is applied to with it, so an invoice paid becomes
// invoice.paid with how it was settled. An invoice QuickBooks answers not
// found for (its deletion) is removed at once, as invoice.deleted with a
// tombstone; a deleted estimate's engagement ends. Events of other companies and entities are acknowledged and
// skipped. A body handled within the hour is acknowledged unread; one
// delivery reads at most Config.WebhookMaxRecords entities, within
// Config.WebhookTimeout. When QuickBooks or the sink fails, or time runs
// out, the answer is 503 and Intuit delivers again.
func (a *Adapter) Webhook(sink changes.ChangeSink) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 2<<20))
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		if !Verified(a.cfg.VerifierToken, r, body) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		events, err := ParseEvents(body)
		if err != nil {
			// Signed by Intuit yet unreadable: sending it again will not
			// help, so say it was received and log it.
			a.log.Error("quickbooks webhook payload unreadable", zap.Error(err))
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(a.Deliver(r.Context(), sink, body, events))
	})
}

// Deliver reads what events name of this company and records the
// changes; body is the verified delivery they came in, which is handled
// once within the hour. It answers the status for Intuit: 200, or 503
// for a delivery to send again.
func (a *Adapter) Deliver(ctx context.Context, sink changes.ChangeSink, body []byte, events []Event) int {
	mine := a.ownEvents(events)
	if len(mine) == 0 {
		return http.StatusOK
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(a.cfg.WebhookTimeout))
	defer cancel()
	repeat, err := a.notices.Once(ctx, "quickbooks/"+a.cfg.Firm+"/"+a.cfg.RealmID, body, func(ctx context.Context) error {
		// A payment is read first, with the invoices it pays: Intuit
		// names those invoices too, and they need no second read.
		slices.SortStableFunc(mine, func(x, y Event) int { return strings.Compare(y.Entity, x.Entity) })
		read := map[string]bool{}
		for _, e := range mine {
			if e.Entity == "invoice" && read[e.ID] {
				continue
			}
			if err := a.ingest(ctx, sink, e, read); err != nil {
				return fmt.Errorf("%s %s: %w", e.Entity, e.ID, err)
			}
		}
		return nil
	})
	switch {
	case err != nil:
		a.log.Error("quickbooks webhook not processed; Intuit will send it again", zap.Error(err))
		return http.StatusServiceUnavailable
	case repeat:
		a.log.Info("quickbooks webhook acknowledged unread: the same body was handled within the hour")
	}
	return http.StatusOK
}

// ownEvents are the events about this company's invoices and payments
// that need a read, one per entity, up to the bound.
func (a *Adapter) ownEvents(events []Event) []Event {
	var mine []Event
	for _, e := range events {
		if e.Realm != a.cfg.RealmID || !digitsOnly(e.ID) || e.Operation == "deleted" && e.Entity == "payment" {
			// A deleted payment names no invoice any more: change data
			// capture reads the invoices it paid again.
			continue
		}
		if e.Entity == "invoice" || e.Entity == "payment" || e.Entity == "estimate" && a.keepsEngagements() {
			mine = append(mine, e)
		}
	}
	kept, over := notifications.Limit(mine, func(e Event) string { return e.Entity + "/" + e.ID }, a.cfg.WebhookMaxRecords)
	if over > 0 {
		a.log.Warn("quickbooks webhook names more entities than one delivery may read; change data capture will find the rest",
			zap.Int("read", len(kept)), zap.Int("left", over))
	}
	return kept
}

// ingest reads what e names and records it; read collects the invoices
// read.
func (a *Adapter) ingest(ctx context.Context, sink changes.ChangeSink, e Event, read map[string]bool) error {
	if e.Entity == "estimate" {
		return a.ingestEstimate(ctx, sink, e)
	}
	if e.Entity == "invoice" {
		read[e.ID] = true
		created := e.Operation == "created"
		if seen, err := a.seen(ctx, e.ID); err != nil || !seen && !created {
			return err
		}
		inv, payments, err := a.readInvoice(ctx, e.ID)
		if errors.Is(err, practice.ErrNotFound) {
			// Deleted (the event's word, or since): QuickBooks'
			// not found removes it now rather than at the next change
			// data capture poll.
			_, err := a.rec.Remove(ctx, sink, changes.Removal{Tenant: practice.Tenant{Firm: a.cfg.Firm},
				Kind: practice.Invoices, ResourceID: invoiceID(e.ID), At: a.clock.Now()})
			return err
		}
		if err != nil {
			return err
		}
		return a.observe(ctx, sink, &inv, payments, e.At, created)
	}
	body, err := a.get(ctx, "/payment/"+e.ID, nil, "payment "+e.ID)
	if errors.Is(err, practice.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if body.Payment == nil {
		return fmt.Errorf("quickbooks: payment %s: %w", e.ID, errNoEntity)
	}
	known := map[string]*payment{body.Payment.ID: body.Payment}
	for _, id := range body.Payment.invoices() {
		if !digitsOnly(id) || read[id] {
			continue
		}
		read[id] = true
		if seen, err := a.seen(ctx, id); err != nil || !seen {
			if err != nil {
				return err
			}
			continue
		}
		got, err := a.get(ctx, "/invoice/"+id, nil, "invoice "+id)
		if errors.Is(err, practice.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if got.Invoice == nil {
			return fmt.Errorf("quickbooks: invoice %s: %w", id, errNoEntity)
		}
		payments, err := a.paymentsOf(ctx, []invoice{*got.Invoice}, known)
		if err != nil {
			return err
		}
		if err := a.observe(ctx, sink, got.Invoice, payments, e.At, false); err != nil {
			return err
		}
	}
	return nil
}

// ingestEstimate reads the estimate e names and records its engagement,
// under the rule invoices follow: one never seen is left to change data
// capture unless the event is its creation.
func (a *Adapter) ingestEstimate(ctx context.Context, sink changes.ChangeSink, e Event) error {
	t := practice.Tenant{Firm: a.cfg.Firm}
	id := engagementID(e.ID)
	created := e.Operation == "created"
	last, err := a.rec.State.Last(ctx, changes.StateKey(t, practice.Engagements, id))
	if err != nil || last == nil && !created {
		return err
	}
	// A deleted estimate (the event's word, or since) reads as its
	// engagement ended, and is never asked of QuickBooks again.
	after, err := a.getEstimate(ctx, t, e.ID)
	if errors.Is(err, practice.ErrNotFound) {
		return nil // never seen: nothing to end
	}
	if err != nil {
		return err
	}
	_, err = a.rec.Observe(ctx, sink, changes.Observation{
		Tenant: t, Kind: practice.Engagements, ResourceID: id, After: after, Created: created, OccurredAt: e.At,
	})
	if err != nil {
		return fmt.Errorf("quickbooks: record estimate %s: %w", e.ID, err)
	}
	return nil
}

// seen reports whether the invoice's state has been recorded: by the
// sync's backfill, a change data capture read or an earlier webhook. An
// invoice never seen is left to change data capture unless the webhook
// tells its creation: its next read announces it raised, where a state
// remembered here from an update would never be announced.
func (a *Adapter) seen(ctx context.Context, qbID string) (bool, error) {
	last, err := a.rec.State.Last(ctx, changes.StateKey(practice.Tenant{Firm: a.cfg.Firm}, practice.Invoices, invoiceID(qbID)))
	return last != nil, err
}

func (a *Adapter) observe(ctx context.Context, sink changes.ChangeSink, inv *invoice, payments map[string]*payment, at time.Time, created bool) error {
	t := practice.Tenant{Firm: a.cfg.Firm}
	after, err := a.invoiceJSON(ctx, t, inv, payments)
	if err != nil {
		return err
	}
	_, err = a.rec.Observe(ctx, sink, changes.Observation{
		Tenant: t, Kind: practice.Invoices, ResourceID: invoiceID(inv.ID), After: after, Created: created,
		Version: inv.MetaData.LastUpdatedTime, OccurredAt: at,
	})
	if err != nil {
		return fmt.Errorf("quickbooks: record invoice %s: %w", inv.ID, err)
	}
	return nil
}
