package vendortest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Karbon's webhook subscriptions, as its published description defines
// them: POST /v3/WebhookSubscriptions (TargetUrl, WebhookType, an optional
// SigningKey), GET and DELETE /v3/WebhookSubscriptions/{WebhookType}, and
// DELETE /v3/WebhookSubscriptions, which removes the Contact, Work and
// Note subscriptions. Only one subscription exists per type, and each
// firm's access key has its own. Karbon ends a subscription after ten
// failed deliveries (Deliver counts them; CancelSubscription ends one at
// once).

// KarbonSubscription is one webhook subscription at the double.
type KarbonSubscription struct {
	AccessKey   string // the firm's access key it was made with
	WebhookType string
	TargetUrl   string
	SigningKey  string
	// Failures counts deliveries in a row that got no 2xx answer.
	Failures int
}

// karbonWebhookTypes are the types the description publishes, with the
// name of each one's payload among its webhooks.
var karbonWebhookTypes = map[string]string{
	"Contact": "contact", "CustomField": "customfield", "Work": "work", "Note": "note", "User": "user",
	"IntegrationTask": "integration-task", "Invoice": "invoice", "EstimateSummary": "estimate-summary",
}

// karbonMaxFailures is how many failed deliveries end a subscription.
const karbonMaxFailures = 10

// AddAccessKey lets another firm's Karbon access key in, so that a second
// firm can connect; the double serves every firm the same records.
func (k *Karbon) AddAccessKey(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.accessKeys == nil {
		k.accessKeys = map[string]bool{}
	}
	k.accessKeys[key] = true
}

// knownKey reports whether an access key is the double's or one added;
// k.mu is held.
func (k *Karbon) knownKey(key string) bool { return key == k.AccessKey || k.accessKeys[key] }

// Subscriptions are the live webhook subscriptions, by access key and
// type.
func (k *Karbon) Subscriptions() []KarbonSubscription {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []KarbonSubscription
	for _, key := range sortedKeys(k.subs) {
		for _, typ := range sortedKeys(k.subs[key]) {
			out = append(out, *k.subs[key][typ])
		}
	}
	return out
}

// CancelSubscription ends the subscriptions of a type (of the access keys
// named; of every one when none is), as Karbon does after ten failed
// deliveries, without telling anyone.
func (k *Karbon) CancelSubscription(webhookType string, accessKeys ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, subs := range k.subs {
		if len(accessKeys) == 0 || slices.Contains(accessKeys, key) {
			delete(subs, webhookType)
		}
	}
}

// Deliver posts payload to every subscription of webhookType (of the
// access keys named; of every one when none is), signed as Karbon signs
// it: the Signature header is the hex HMAC-SHA256 of the body under the
// subscription's SigningKey. A delivery without a 2xx answer counts
// towards the ten that end the subscription. It returns the status of
// each delivery, and an error when there was no subscription to deliver
// to or a delivery could not be made. A payload that is not the
// description's for the type is a violation.
func (k *Karbon) Deliver(webhookType string, payload []byte, accessKeys ...string) ([]int, error) {
	if k.desc != nil {
		if err := k.desc.checkWebhook(karbonWebhookTypes[webhookType], payload); err != nil {
			k.conformance.mu.Lock()
			k.violations = append(k.violations, "webhook "+webhookType+": "+strings.Join(strings.Fields(err.Error()), " "))
			k.conformance.mu.Unlock()
		}
	}
	k.mu.Lock()
	var targets []KarbonSubscription
	for _, key := range sortedKeys(k.subs) {
		if s := k.subs[key][webhookType]; s != nil && (len(accessKeys) == 0 || slices.Contains(accessKeys, key)) {
			targets = append(targets, *s)
		}
	}
	k.mu.Unlock()
	if len(targets) == 0 {
		return nil, fmt.Errorf("karbon double: no %s subscription to deliver to", webhookType)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	var statuses []int
	for _, s := range targets {
		status, err := deliverKarbon(hc, s, payload)
		if err != nil {
			return statuses, err
		}
		statuses = append(statuses, status)
		k.delivered(s, status/100 == 2)
	}
	return statuses, nil
}

func deliverKarbon(hc *http.Client, s KarbonSubscription, payload []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, s.TargetUrl, bytes.NewReader(payload))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if s.SigningKey != "" {
		req.Header.Set("Signature", SignKarbon(s.SigningKey, payload))
	}
	resp, err := hc.Do(req)
	if err != nil {
		// Unreachable counts as failed, as at Karbon.
		return 0, nil
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// delivered counts a delivery to s, ending the subscription at the tenth
// failure in a row.
func (k *Karbon) delivered(s KarbonSubscription, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cur := k.subs[s.AccessKey][s.WebhookType]
	if cur == nil || cur.TargetUrl != s.TargetUrl {
		return
	}
	if ok {
		cur.Failures = 0
		return
	}
	if cur.Failures++; cur.Failures >= karbonMaxFailures {
		delete(k.subs[s.AccessKey], s.WebhookType)
	}
}

// subscriptions serves /v3/WebhookSubscriptions[/{WebhookType}] for the
// request's access key; k.mu is held.
func (k *Karbon) subscriptions(w http.ResponseWriter, r *http.Request, typ string) {
	key := r.Header.Get("AccessKey")
	if k.subs == nil {
		k.subs = map[string]map[string]*KarbonSubscription{}
	}
	if k.subs[key] == nil {
		k.subs[key] = map[string]*KarbonSubscription{}
	}
	mine := k.subs[key]
	switch {
	case typ == "" && r.Method == http.MethodPost:
		k.subscribe(w, r, mine)
	case typ == "" && r.Method == http.MethodDelete:
		for _, t := range []string{"Contact", "Work", "Note"} {
			delete(mine, t)
		}
		w.WriteHeader(http.StatusNoContent)
	case typ != "" && karbonWebhookTypes[typ] == "":
		karbonError(w, http.StatusNotFound, "4004", "No Webhook Type found for the provided WebhookType input value : "+typ+
			". Valid WebhookTypes are Contact, Work, Note")
	case typ != "" && mine[typ] == nil && (r.Method == http.MethodGet || r.Method == http.MethodDelete):
		karbonError(w, http.StatusNotFound, "4004", "No existing webhook subscription for "+typ)
	case typ != "" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, subscriptionJSON(k.URL, mine[typ]))
	case typ != "" && r.Method == http.MethodDelete:
		delete(mine, typ)
		w.WriteHeader(http.StatusNoContent)
	default:
		karbonError(w, http.StatusNotFound, "4004", "No HTTP resource was found that matches the request URI.")
	}
}

func (k *Karbon) subscribe(w http.ResponseWriter, r *http.Request, mine map[string]*KarbonSubscription) {
	var in struct {
		TargetUrl, WebhookType string
		SigningKey             *string
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		karbonError(w, http.StatusBadRequest, "4005", "The request body is not a valid model.")
		return
	}
	switch {
	case in.TargetUrl == "":
		karbonError(w, http.StatusBadRequest, "4005", "Required payload data is missing: TargetUrl")
		return
	case in.WebhookType == "":
		karbonError(w, http.StatusBadRequest, "4005", "Required payload data is missing: WebhookType")
		return
	case karbonWebhookTypes[in.WebhookType] == "":
		karbonError(w, http.StatusBadRequest, "4004", "No Webhook Type found for the provided WebhookType input value : "+
			in.WebhookType+". Valid WebhookTypes are Contact, Work, Note")
		return
	case mine[in.WebhookType] != nil:
		karbonError(w, http.StatusBadRequest, "4001", "A webhook subscription already exists for "+in.WebhookType)
		return
	}
	s := &KarbonSubscription{AccessKey: r.Header.Get("AccessKey"), WebhookType: in.WebhookType, TargetUrl: in.TargetUrl}
	if in.SigningKey != nil {
		s.SigningKey = *in.SigningKey
	}
	mine[in.WebhookType] = s
	w.Header().Set("Location", fmt.Sprintf("%s/v3/WebhookSubscriptions('%s')", k.URL, in.TargetUrl))
	writeJSON(w, http.StatusCreated, subscriptionJSON(k.URL, s))
}

func subscriptionJSON(base string, s *KarbonSubscription) []byte {
	b, _ := json.Marshal(map[string]string{"@odata.context": base + "/v3/$metadata#WebhookSubscriptions/$entity",
		"TargetUrl": s.TargetUrl, "WebhookType": s.WebhookType})
	return b
}

// Karbon tells a subscription of each change to a record of its type
// after a while, as one notification however many changes the record had
// in it (Karbon coalesces a record's changes over 60 s): NotifyChanges
// turns it on.

// karbonTold is a record's changes not yet told.
type karbonTold struct {
	typ, key, action string
	first            time.Time
}

// NotifyChanges makes the double tell its subscriptions of every change,
// made through its API or by a test (as a Karbon user would in Karbon's
// own pages), as Karbon does: a record's changes within window of its
// first are one notification, sent when the window ends (Karbon's is
// 60 s; zero tells each change just after it is made), Inserted when the
// record was created in it, Deleted when it is gone, else Updated. Work
// items, contacts (with organizations and client groups), users and
// invoices are told. Close stops it.
func (k *Karbon) NotifyChanges(window time.Duration) {
	k.mu.Lock()
	k.notifying, k.window = true, window
	start := k.push == nil
	k.mu.Unlock()
	if start {
		p := startPusher(k.tellDue)
		k.mu.Lock()
		k.push = p
		k.mu.Unlock()
	}
}

// FlushNotifications tells every change waiting, at once.
func (k *Karbon) FlushNotifications() {
	k.tellDue(time.Now().Add(24 * time.Hour))
}

// told notes a change to a record for NotifyChanges; k.mu is held.
func (k *Karbon) told(typ, key, action string) {
	if !k.notifying || !k.subscribed(typ) {
		return // a change no subscription was there for is told to no one
	}
	if k.pending == nil {
		k.pending = map[string]*karbonTold{}
	}
	id := typ + "/" + key
	t := k.pending[id]
	switch {
	case t == nil:
		k.pending[id] = &karbonTold{typ: typ, key: key, action: action, first: time.Now()}
		k.pendingOrder = append(k.pendingOrder, id)
	case action == "Deleted":
		t.action = action
	}
	k.push.poke()
}

// subscribed reports whether any access key subscribed to typ; k.mu is
// held.
func (k *Karbon) subscribed(typ string) bool {
	for _, subs := range k.subs {
		if subs[typ] != nil {
			return true
		}
	}
	return false
}

// tellDue sends the notifications whose window has ended by now and
// answers when the next one ends.
func (k *Karbon) tellDue(now time.Time) time.Time {
	k.mu.Lock()
	var due []*karbonTold
	var next time.Time
	keep := k.pendingOrder[:0]
	for _, id := range k.pendingOrder {
		t := k.pending[id]
		if end := t.first.Add(k.window); end.After(now) {
			keep = append(keep, id)
			if next.IsZero() || end.Before(next) {
				next = end
			}
			continue
		}
		due = append(due, t)
		delete(k.pending, id)
	}
	k.pendingOrder = keep
	k.mu.Unlock()
	for _, t := range due {
		// A type no subscription takes is told to no one.
		_, _ = k.Deliver(t.typ, KarbonWebhook(t.typ, t.key, t.action, time.Now().UTC().Truncate(time.Second)))
	}
	return next
}
