package karbon

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

// notification is Karbon's webhook payload (contact-webhook,
// work-webhook, user-webhook, invoice-webhook in the API description).
type notification struct {
	ResourcePermaKey string
	ResourceType     string
	ActionType       string
	TimeStamp        string
}

// Webhook is the ingest route for the firm's Karbon webhook subscriptions
// (WebhookType Contact, Work and User, and Invoice when Karbon's billing
// is the firm's ledger; otherwise an Invoice notification is acknowledged
// unread). It accepts a POST only when the Signature header is the hex
// HMAC-SHA256 of the raw body under Config.WebhookSigningKey (the
// SigningKey given when subscribing), then keeps what the body names in
// the notification inbox and reads it: each record that changed is read
// from Karbon, compared with the last state seen and published to sink
// when it differs, so a work item moved in Karbon becomes
// job.stage_changed downstream. A record Karbon reports as Updated that
// was never seen before is only remembered (the read model's backfill has
// normally seen it first). A record Karbon answers not found for (its
// Deleted notification, or one gone since it was updated) is removed
// from the copy at once, as job.deleted, client.deleted or
// person.deleted.
//
// A body is kept once an hour: Karbon's signature has no timestamp, so a
// captured notification posted again verifies, and is acknowledged
// without reading Karbon again. One body keeps each record it names once,
// at most Config.WebhookMaxRecords of them; the delivery reads for
// Config.WebhookTimeout, then is answered, and what is left is read by
// the sync (woken through the deps' Wake), within Karbon's allowance.
//
// It answers 200 once the body is kept, 401 to a missing or forged
// signature (and to every request when no signing key is set), and 503
// when the body could not be kept (or, with no sync to read the rest,
// when its reads are not done), so that Karbon delivers again (it retries
// ten times, then ends the subscription).
func (a *Adapter) Webhook(sink changes.ChangeSink) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if !webhooksig.ValidHMAC([]byte(a.cfg.WebhookSigningKey), body, r.Header.Get(a.cfg.WebhookSignatureHeader)) {
			a.log.Warn("karbon webhook refused: bad signature", zap.String("remote", r.RemoteAddr))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		notes, err := parseNotifications(body)
		if err != nil {
			http.Error(w, "not a Karbon webhook payload", http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(a.cfg.WebhookTimeout))
		defer cancel()
		repeat, err := a.receiver(sink).Receive(ctx, body, a.items(notes))
		switch {
		case err != nil:
			a.log.Error("karbon webhook not processed; Karbon will send it again", zap.Error(err))
			w.WriteHeader(http.StatusServiceUnavailable)
		case repeat:
			a.log.Info("karbon webhook acknowledged unread: the same body was kept within the hour",
				zap.String("remote", r.RemoteAddr))
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
}

// ReadNotified reads what Karbon's kept notifications name and are due,
// for the sync, which is woken when a delivery left some: more says some
// are left.
func (a *Adapter) ReadNotified(ctx context.Context) (more bool, err error) {
	return a.receiver(a.changes).Drain(ctx)
}

// receiver keeps Karbon's notifications in the firm's scope and reads
// them into sink, a few records at once.
func (a *Adapter) receiver(sink changes.ChangeSink) notifications.Receiver {
	return notifications.Receiver{Inbox: a.inbox, Scope: "karbon/" + a.cfg.Firm + "/" + a.role, Batch: 2 * a.cfg.DetailConcurrency, Wake: a.deps.Wake, One: &a.one,
		Read: func(ctx context.Context, items []notifications.Kept) ([]string, error) {
			return notifications.Each(ctx, items, a.cfg.DetailConcurrency, func(ctx context.Context, k notifications.Kept) error {
				var n notification
				if json.Unmarshal(k.Item, &n) != nil {
					return nil // not an item of ours: nothing to read
				}
				err := a.ingest(ctx, sink, n, k.At)
				var unusable *practice.UnusableError
				if errors.As(err, &unusable) {
					// That record's alone, and read: the sync asks for it
					// again at its next poll, rather than the inbox every
					// few seconds (or Karbon the whole delivery).
					a.log.Warn("a record a Karbon webhook names cannot be used; the sync will ask for it again",
						zap.String("kind", string(unusable.Kind)), zap.String("id", unusable.ID), zap.Error(err))
					return nil
				}
				if err != nil {
					return fmt.Errorf("%s %s: %w", n.ResourceType, n.ResourcePermaKey, err)
				}
				return nil
			})
		}}
}

// items are the reads the notifications ask for: each record once, up to
// the bound; a record named as inserted anywhere in the body is read as
// inserted. A deletion is read too: Karbon's not found confirms it.
func (a *Adapter) items(notes []notification) [][]byte {
	type ref [2]string
	key := func(n notification) ref { return ref{n.ResourceType, n.ResourcePermaKey} }
	inserted := map[ref]bool{}
	kept := notes[:0:0]
	for _, n := range notes {
		if !validKey(n.ResourcePermaKey) {
			continue
		}
		inserted[key(n)] = inserted[key(n)] || n.ActionType == "Inserted"
		kept = append(kept, n)
	}
	notes, over := notifications.Limit(kept, key, a.cfg.WebhookMaxRecords)
	if over > 0 {
		a.log.Warn("karbon webhook names more records than one delivery may keep; the sync will find the rest",
			zap.Int("kept", len(notes)), zap.Int("left", over))
	}
	out := make([][]byte, 0, len(notes))
	for _, n := range notes {
		if inserted[key(n)] {
			n.ActionType = "Inserted"
		}
		b, _ := json.Marshal(n)
		out = append(out, b)
	}
	return out
}

// parseNotifications reads one notification or a list of them.
func parseNotifications(body []byte) ([]notification, error) {
	var list []notification
	if err := json.Unmarshal(body, &list); err == nil {
		return list, nil
	}
	var one notification
	if err := json.Unmarshal(body, &one); err != nil {
		return nil, err
	}
	return []notification{one}, nil
}

// ingest reads the record n names and records it; heard is when its
// notification came.
func (a *Adapter) ingest(ctx context.Context, sink changes.ChangeSink, n notification, heard time.Time) error {
	if !validKey(n.ResourcePermaKey) {
		return nil
	}
	at, err := karbonTime(n.TimeStamp)
	if err != nil {
		at = time.Time{}
	}
	var (
		kind  practice.Kind
		ids   []string
		after json.RawMessage
	)
	// When the re-read began orders it against a poll page of the same
	// user read before it (users publish no modification time).
	readAt := a.clock.Now()
	switch n.ResourceType {
	case "Work":
		kind, ids = practice.Jobs, []string{"job_" + n.ResourcePermaKey}
		after, err = a.getJob(ctx, n.ResourcePermaKey)
	case "Contact":
		// Karbon reports contacts, organizations and client groups
		// alike as Contact; the key says which only by where it is.
		kind = practice.Clients
		for _, k := range []byte{'c', 'o', 'g'} {
			ref := clientRef{k, n.ResourcePermaKey}
			ids = append(ids, ref.id())
			if after, err = a.getClient(ctx, ref); !errors.Is(err, practice.ErrNotFound) {
				ids = ids[len(ids)-1:]
				break
			}
		}
	case "User":
		kind, ids = practice.People, []string{userID(n.ResourcePermaKey)}
		after, err = a.getPerson(ctx, n.ResourcePermaKey)
	case "Invoice":
		if !a.ledger {
			return nil
		}
		kind, ids = practice.Invoices, []string{"inv_" + n.ResourcePermaKey}
		// Karbon tells an invoice's first appearance as Updated too. One
		// never seen is left to the sync: its poll announces it raised
		// (its backfill takes it silently), where a state remembered
		// here would never be announced.
		seen, lerr := a.rec.State.Last(ctx, changes.StateKey(a.tenant(), kind, ids[0]))
		if lerr != nil || seen == nil {
			return lerr
		}
		after, err = a.getInvoice(ctx, n.ResourcePermaKey)
	default:
		return nil
	}
	if errors.Is(err, practice.ErrNotFound) {
		// Deleted (Karbon's Deleted, or gone since an update), or no
		// longer a client: on Karbon's word, the copy's record goes, as
		// the reconciliation would remove it.
		return a.removeAll(ctx, sink, kind, ids, heard)
	}
	if err != nil {
		return err
	}
	published, err := a.rec.Observe(ctx, sink, changes.Observation{
		Tenant: a.tenant(), Kind: kind, ResourceID: ids[0], After: after, Created: n.ActionType == "Inserted",
		Version: n.TimeStamp, OccurredAt: at, ReadAt: readAt,
	})
	if err != nil {
		return fmt.Errorf("karbon: record %s: %w", ids[0], err)
	}
	if published {
		a.heard(heard)
	}
	return nil
}

// removeAll removes each of ids Karbon answered not found for, as
// confirmed now: the one the copy holds is removed, with its change
// record, and the rest are nothing.
func (a *Adapter) removeAll(ctx context.Context, sink changes.ChangeSink, kind practice.Kind, ids []string, heard time.Time) error {
	at := a.clock.Now()
	for _, id := range ids {
		rm := changes.Removal{Tenant: a.tenant(), Kind: kind, ResourceID: id, At: at}
		published, err := a.rec.Remove(ctx, sink, rm)
		if err != nil {
			return fmt.Errorf("karbon: remove %s: %w", id, err)
		}
		if published {
			a.heard(heard)
		}
	}
	return nil
}

// Notifies reports whether Karbon tells the kind's changes: work items,
// contacts and users to the records' subscriptions, invoices when its
// billing is the ledger; none without a signing key to check them with.
func (a *Adapter) Notifies(k practice.Kind) bool {
	if a.cfg.WebhookSigningKey == "" {
		return false
	}
	switch k {
	case practice.Jobs, practice.Clients, practice.People:
		return a.role == "records"
	case practice.Invoices:
		return a.ledger
	}
	return false
}
