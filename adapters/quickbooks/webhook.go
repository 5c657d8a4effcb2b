package quickbooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/notifications"
	"github.com/practicegw/practicegw/adapters/kit/paging"
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
// The invoices, payments and estimates the body names for this company
// are kept in the notification inbox and read: the invoices a hundred at
// a time (select * from Invoice where Id in (...)), each payment
// (GET .../payment/{id}) with the invoices it is applied to, each estimate
// (GET .../estimate/{id}); each is compared with the last state seen and
// published to sink when it differs, so an invoice paid becomes
// invoice.paid with how it was settled. An invoice QuickBooks no longer
// has (its deletion) is removed at once, as invoice.deleted with a
// tombstone; a deleted estimate's engagement ends. Events of other
// companies and entities are acknowledged and skipped. A body kept
// within the hour is acknowledged unread; one keeps at most
// Config.WebhookMaxRecords entities. The delivery reads for
// Config.WebhookTimeout, then is answered 200, and what is left is read
// by the sync within the company's 10 calls a second, so Intuit never
// sends again for the gateway's slowness; when the body cannot be kept
// the answer is 503 and Intuit delivers again.
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

// Deliver keeps what events name of this company and reads it; body is
// the verified delivery they came in, which is kept once within the
// hour. It answers the status for Intuit: 200, or 503 for a delivery to
// send again.
func (a *Adapter) Deliver(ctx context.Context, sink changes.ChangeSink, body []byte, events []Event) int {
	mine := a.ownEvents(events)
	if len(mine) == 0 {
		return http.StatusOK
	}
	items := make([][]byte, len(mine))
	for i, e := range mine {
		items[i], _ = json.Marshal(e)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(a.cfg.WebhookTimeout))
	defer cancel()
	repeat, err := a.receiver(sink).Receive(ctx, body, items)
	switch {
	case err != nil:
		a.log.Error("quickbooks webhook not processed; Intuit will send it again", zap.Error(err))
		return http.StatusServiceUnavailable
	case repeat:
		a.log.Info("quickbooks webhook acknowledged unread: the same body was kept within the hour")
	}
	return http.StatusOK
}

// ReadNotified reads what Intuit's kept notifications name and are due,
// for the sync, which is woken when a delivery left some: more says some
// are left.
func (a *Adapter) ReadNotified(ctx context.Context) (more bool, err error) {
	return a.receiver(a.deps.Changes).Drain(ctx)
}

// invoicesPerRead is how many invoices one query asks for by their ids.
const invoicesPerRead = 100

// receiver keeps Intuit's notifications in the company's scope and reads
// them into sink.
func (a *Adapter) receiver(sink changes.ChangeSink) notifications.Receiver {
	return notifications.Receiver{Inbox: a.inbox, Scope: "quickbooks/" + a.cfg.Firm + "/" + a.cfg.RealmID, Batch: invoicesPerRead, Wake: a.deps.Wake, One: &a.one,
		Read: func(ctx context.Context, items []notifications.Kept) ([]string, error) {
			return a.ingestAll(ctx, sink, items)
		}}
}

// ownEvents are the events about this company's invoices, payments and
// estimates that need a read, one per entity, up to the bound.
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
		a.log.Warn("quickbooks webhook names more entities than one delivery may keep; change data capture will find the rest",
			zap.Int("kept", len(kept)), zap.Int("left", over))
	}
	return kept
}

// notice is an event kept, with when its notification came.
type notice struct {
	Event
	heard time.Time
	id    string
}

// ingestAll reads what the items name: the invoices in one query, with
// the payments applied to them in one more; then each payment not among
// those (read alone, GET .../payment/{id}) with the invoices it pays that
// were not read yet, again in one query; then the estimates. An item
// whose read fails is answered failed, for a later try.
func (a *Adapter) ingestAll(ctx context.Context, sink changes.ChangeSink, items []notifications.Kept) ([]string, error) {
	var invoices, payments, estimates []notice
	for _, k := range items {
		var e Event
		if json.Unmarshal(k.Item, &e) != nil {
			continue
		}
		n := notice{Event: e, heard: k.At, id: k.ID}
		switch e.Entity {
		case "invoice":
			invoices = append(invoices, n)
		case "payment":
			payments = append(payments, n)
		default:
			estimates = append(estimates, n)
		}
	}
	var failed []string
	var first error
	fail := func(ns []notice, err error) {
		for _, n := range ns {
			failed = append(failed, n.id)
		}
		if first == nil {
			first = err
		}
	}
	known, err := a.ingestInvoices(ctx, sink, invoices, nil)
	if err != nil {
		fail(invoices, err)
		fail(payments, err) // their invoices may be among those
		payments = nil
	}
	read := map[string]bool{}
	for _, n := range invoices {
		read[n.ID] = true
	}
	// A payment's invoices not named themselves (Intuit names them too,
	// as a rule) are read with the payment's own word on them.
	var more []notice
	for _, n := range payments {
		p := known[n.ID]
		if p == nil {
			body, err := a.get(ctx, "/payment/"+n.ID, nil, "payment "+n.ID)
			if errors.Is(err, practice.ErrNotFound) {
				continue
			}
			if err == nil && body.Payment == nil {
				err = fmt.Errorf("quickbooks: payment %s: %w", n.ID, errNoEntity)
			}
			if err != nil {
				fail([]notice{n}, fmt.Errorf("payment %s: %w", n.ID, err))
				continue
			}
			p = body.Payment
			known[p.ID] = p
		}
		for _, id := range p.invoices() {
			if digitsOnly(id) && !read[id] {
				read[id] = true
				more = append(more, notice{Event: Event{Realm: n.Realm, Entity: "invoice", ID: id, Operation: "updated", At: n.At},
					heard: n.heard, id: n.id})
			}
		}
	}
	if _, err := a.ingestInvoices(ctx, sink, more, known); err != nil {
		fail(more, err)
	}
	for _, n := range estimates {
		if err := a.ingestEstimate(ctx, sink, n); err != nil {
			fail([]notice{n}, fmt.Errorf("estimate %s: %w", n.ID, err))
		}
	}
	return failed, first
}

// ingestInvoices reads the invoices ns name in one query, with the
// payments applied to them in one more (known ones aside), and records
// each; one QuickBooks no longer has is removed. An invoice never seen is
// left to change data capture unless the event tells its creation. It
// answers the payments known, those read among them.
func (a *Adapter) ingestInvoices(ctx context.Context, sink changes.ChangeSink, ns []notice, known map[string]*payment) (map[string]*payment, error) {
	if known == nil {
		known = map[string]*payment{}
	}
	byID := map[string]notice{}
	var ids []string
	for _, n := range ns {
		if prev, ok := byID[n.ID]; ok {
			if prev.Operation == "created" {
				n.Operation = "created"
			}
			byID[n.ID] = n
			continue
		}
		seen, err := a.seen(ctx, n.ID)
		if err != nil {
			return known, err
		}
		if !seen && n.Operation != "created" {
			continue
		}
		byID[n.ID] = n
		ids = append(ids, n.ID)
	}
	if len(ids) == 0 {
		return known, nil
	}
	stmt := "select * from Invoice where Id in ('" + strings.Join(ids, "','") + fmt.Sprintf("') MAXRESULTS %d", maxResults)
	body, err := a.get(ctx, "/query", url.Values{"query": {stmt}}, "invoices")
	if err != nil {
		return known, err
	}
	var invs []invoice
	if body.QueryResponse != nil {
		invs = body.QueryResponse.Invoice
	}
	payments, err := a.paymentsOf(ctx, invs, known)
	if err != nil {
		return known, err
	}
	found := map[string]bool{}
	for i := range invs {
		if _, ok := byID[invs[i].ID]; ok {
			found[invs[i].ID] = true
		}
	}
	// Compared a few at once: their change records and states share the
	// stores' commits.
	err = paging.Parallel(ctx, observeWidth, len(invs), func(ctx context.Context, i int) error {
		n, ok := byID[invs[i].ID]
		if !ok {
			return nil
		}
		return a.observe(ctx, sink, &invs[i], payments, n.At, n.Operation == "created", n.heard)
	})
	if err != nil {
		return payments, err
	}
	var gone []string
	for _, id := range ids {
		if !found[id] {
			gone = append(gone, id)
		}
	}
	// Not in QuickBooks' answer: deleted (the event's word, or since).
	// Removed now rather than at the next change data capture poll.
	err = paging.Parallel(ctx, observeWidth, len(gone), func(ctx context.Context, i int) error {
		published, err := a.rec.Remove(ctx, sink, changes.Removal{Tenant: practice.Tenant{Firm: a.cfg.Firm},
			Kind: practice.Invoices, ResourceID: invoiceID(gone[i]), At: a.clock.Now()})
		if published {
			a.heard(byID[gone[i]].heard)
		}
		return err
	})
	return payments, err
}

// observeWidth is how many invoices a notification's read compares at
// once. It costs no vendor call: what bounds a burst's comparing is the
// store's commits (a bbolt commit's fsyncs cost the same whatever it
// holds), so the more at once, the fewer commits a burst waits for: eight
// at once kept a hundred invoices' webhooks a second and more behind
// their read on a loaded machine.
const observeWidth = 32

// ingestEstimate reads the estimate n names and records its engagement,
// under the rule invoices follow: one never seen is left to change data
// capture unless the event is its creation.
func (a *Adapter) ingestEstimate(ctx context.Context, sink changes.ChangeSink, n notice) error {
	t := practice.Tenant{Firm: a.cfg.Firm}
	id := engagementID(n.ID)
	created := n.Operation == "created"
	last, err := a.rec.State.Last(ctx, changes.StateKey(t, practice.Engagements, id))
	if err != nil || last == nil && !created {
		return err
	}
	// A deleted estimate (the event's word, or since) reads as its
	// engagement ended, and is never asked of QuickBooks again.
	after, err := a.getEstimate(ctx, t, n.ID)
	if errors.Is(err, practice.ErrNotFound) {
		return nil // never seen: nothing to end
	}
	if err != nil {
		return err
	}
	published, err := a.rec.Observe(ctx, sink, changes.Observation{
		Tenant: t, Kind: practice.Engagements, ResourceID: id, After: after, Created: created, OccurredAt: n.At,
	})
	if err != nil {
		return fmt.Errorf("quickbooks: record estimate %s: %w", n.ID, err)
	}
	if published {
		a.heard(n.heard)
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

func (a *Adapter) observe(ctx context.Context, sink changes.ChangeSink, inv *invoice, payments map[string]*payment, at time.Time, created bool, heard time.Time) error {
	t := practice.Tenant{Firm: a.cfg.Firm}
	after, err := a.invoiceJSON(ctx, t, inv, payments)
	if err != nil {
		return err
	}
	published, err := a.rec.Observe(ctx, sink, changes.Observation{
		Tenant: t, Kind: practice.Invoices, ResourceID: invoiceID(inv.ID), After: after, Created: created,
		Version: inv.MetaData.LastUpdatedTime, OccurredAt: at,
	})
	if err != nil {
		return fmt.Errorf("quickbooks: record invoice %s: %w", inv.ID, err)
	}
	if published {
		a.heard(heard)
	}
	return nil
}

// heard tells the deps when a notification that led to a change came.
func (a *Adapter) heard(at time.Time) {
	if a.deps.Heard != nil && !at.IsZero() {
		a.deps.Heard(at)
	}
}

// Notifies reports whether Intuit tells the kind's changes: invoices,
// and estimates when they are the firm's engagements, with the app's
// verifier token to check them with.
func (a *Adapter) Notifies(k practice.Kind) bool {
	if a.cfg.VerifierToken == "" {
		return false
	}
	return k == practice.Invoices || k == practice.Engagements && a.keepsEngagements()
}
