package vendortest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Microsoft Graph's change notifications on a drive, as Graph publishes
// them for driveItem: POST /subscriptions (changeType "updated" alone,
// resource a drive's root, /drives/{drive}/root or /me/drive/root, an
// expirationDateTime at most 42,300 minutes ahead, a clientState of at
// most 128 characters, a notificationUrl and an optional
// lifecycleNotificationUrl), each address validated before the
// subscription is made (a POST to it with ?validationToken=..., answered
// within 10 s by 200, text/plain and the token); GET, PATCH (a new
// expirationDateTime) and DELETE /subscriptions/{id}, and POST
// /subscriptions/{id}/reauthorize. A change to the drive is told at once
// to each live subscription of it, as {"value":[{subscriptionId,
// subscriptionExpirationDateTime, changeType, resource, clientState,
// tenantId}]}, without what changed (the receiver reads the delta); a
// subscription past its expiration tells nothing and is gone. A
// reauthorizationRequired lifecycle notification (RequireReauthorization)
// goes to the lifecycle address; the subscription then tells nothing
// until it is reauthorized or renewed. Graph may also drop a
// subscription without a word (DropSubscription).

// GraphMaxSubscription is the longest a driveItem subscription lives.
const GraphMaxSubscription = 42300 * time.Minute

// GraphSubscription is one subscription at the double.
type GraphSubscription struct {
	ID, Resource, ChangeType, NotificationURL, LifecycleURL, ClientState string
	Expires                                                              time.Time
	drive                                                                string
	// Reauthorize says Graph asked for reauthorization: nothing is told
	// until it is reauthorized or renewed.
	Reauthorize bool
	// Told counts the notifications sent, Failed those not answered 2xx.
	Told, Failed int
}

// GraphTenantID is the Entra tenant the double's notifications name.
const GraphTenantID = "84bd8158-6d4d-4958-8b9f-9d6445542f95"

// Subscriptions are the live subscriptions, by id.
func (g *Graph) Subscriptions() []GraphSubscription {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweepLocked(time.Now())
	var out []GraphSubscription
	for _, s := range g.subs {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// DropSubscription ends a subscription without a word, as Graph may.
func (g *Graph) DropSubscription(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.subs, id)
}

// RequireReauthorization sends a subscription's reauthorizationRequired
// lifecycle notification; the subscription tells nothing more until it
// is reauthorized or renewed.
func (g *Graph) RequireReauthorization(id string) {
	g.mu.Lock()
	s := g.subs[id]
	if s == nil {
		g.mu.Unlock()
		return
	}
	s.Reauthorize = true
	target, sub := s.LifecycleURL, *s
	g.mu.Unlock()
	if target == "" {
		return
	}
	body, _ := json.Marshal(map[string]any{"value": []map[string]any{{
		"subscriptionId": sub.ID, "subscriptionExpirationDateTime": sub.Expires.UTC().Format(time.RFC3339Nano),
		"tenantId": GraphTenantID, "clientState": sub.ClientState, "lifecycleEvent": "reauthorizationRequired"}}})
	_, _ = postJSON(target, body, nil)
}

// sweepLocked forgets the subscriptions past their expiration; g.mu is
// held.
func (g *Graph) sweepLocked(now time.Time) {
	for id, s := range g.subs {
		if !now.Before(s.Expires) {
			delete(g.subs, id)
		}
	}
}

// subscriptions serves /subscriptions[/{id}[/reauthorize]].
func (g *Graph) subscriptions(w http.ResponseWriter, r *http.Request, rest string) {
	id, action, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	switch {
	case id == "" && r.Method == http.MethodPost:
		g.subscribe(w, r)
		return
	case id == "":
		graphError(w, http.StatusMethodNotAllowed, "invalidRequest", "The method is not allowed.")
		return
	}
	g.mu.Lock()
	g.sweepLocked(time.Now())
	s := g.subs[id]
	if s == nil {
		g.mu.Unlock()
		graphError(w, http.StatusNotFound, "ResourceNotFound", "The object was not found.")
		return
	}
	switch {
	case action == "reauthorize" && r.Method == http.MethodPost:
		s.Reauthorize = false
		g.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case action != "":
		g.mu.Unlock()
		graphError(w, http.StatusNotFound, "ResourceNotFound", "The object was not found.")
	case r.Method == http.MethodGet:
		b := subscriptionBody(s)
		g.mu.Unlock()
		writeJSON(w, http.StatusOK, b)
	case r.Method == http.MethodDelete:
		delete(g.subs, id)
		g.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPatch:
		var in struct {
			ExpirationDateTime time.Time `json:"expirationDateTime"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || !validExpiry(in.ExpirationDateTime) {
			g.mu.Unlock()
			graphError(w, http.StatusBadRequest, "InvalidRequest", "Subscription expiration can only be 42300 minutes in the future.")
			return
		}
		s.Expires, s.Reauthorize = in.ExpirationDateTime, false
		b := subscriptionBody(s)
		g.mu.Unlock()
		writeJSON(w, http.StatusOK, b)
	default:
		g.mu.Unlock()
		graphError(w, http.StatusMethodNotAllowed, "invalidRequest", "The method is not allowed.")
	}
}

func validExpiry(t time.Time) bool {
	now := time.Now()
	return t.After(now) && !t.After(now.Add(GraphMaxSubscription))
}

// subscribe makes a subscription once both its addresses answer the
// validation request.
func (g *Graph) subscribe(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ChangeType               string    `json:"changeType"`
		NotificationURL          string    `json:"notificationUrl"`
		LifecycleNotificationURL string    `json:"lifecycleNotificationUrl"`
		Resource                 string    `json:"resource"`
		ExpirationDateTime       time.Time `json:"expirationDateTime"`
		ClientState              string    `json:"clientState"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		graphError(w, http.StatusBadRequest, "InvalidRequest", "The request body is not a subscription.")
		return
	}
	drive, ok := g.subscribedDrive(in.Resource)
	switch {
	case !ok:
		graphError(w, http.StatusBadRequest, "InvalidRequest", "Subscriptions on a driveItem are made on the root of a drive.")
		return
	case in.ChangeType != "updated":
		graphError(w, http.StatusBadRequest, "InvalidRequest", "Only the 'updated' changeType is supported on driveItem.")
		return
	case !validExpiry(in.ExpirationDateTime):
		graphError(w, http.StatusBadRequest, "InvalidRequest", "Subscription expiration can only be 42300 minutes in the future.")
		return
	case len(in.ClientState) > 128:
		graphError(w, http.StatusBadRequest, "InvalidRequest", "clientState is at most 128 characters.")
		return
	case !strings.HasPrefix(in.NotificationURL, "http"):
		graphError(w, http.StatusBadRequest, "InvalidRequest", "notificationUrl must be an https address.")
		return
	}
	for _, target := range []string{in.NotificationURL, in.LifecycleNotificationURL} {
		if target != "" && !validated(target) {
			graphError(w, http.StatusBadRequest, "ValidationError",
				"Subscription validation request failed. Notification endpoint must respond with 200 OK to validation request.")
			return
		}
	}
	s := &GraphSubscription{ID: newGUID(), Resource: in.Resource, ChangeType: in.ChangeType, NotificationURL: in.NotificationURL,
		LifecycleURL: in.LifecycleNotificationURL, ClientState: in.ClientState, Expires: in.ExpirationDateTime, drive: drive}
	g.mu.Lock()
	if g.subs == nil {
		g.subs = map[string]*GraphSubscription{}
	}
	g.subs[s.ID] = s
	b := subscriptionBody(s)
	g.mu.Unlock()
	writeJSON(w, http.StatusCreated, b)
}

// subscribedDrive is the drive a subscription's resource is the root of.
func (g *Graph) subscribedDrive(resource string) (string, bool) {
	r := "/" + strings.Trim(resource, "/")
	if r == "/me/drive/root" {
		return g.DriveID, true
	}
	rest, ok := strings.CutPrefix(r, "/drives/")
	id, root, _ := strings.Cut(rest, "/")
	if !ok || root != "root" {
		return "", false
	}
	_, found := g.driveOf(id)
	return id, found
}

// validated sends Graph's validation request to target and reports
// whether it answered as Graph requires.
func validated(target string) bool {
	token := "Validation: Testing client application reachability for subscription Request-Id: " + newGUID()
	u, err := url.Parse(target)
	if err != nil {
		return false
	}
	q := u.Query()
	q.Set("validationToken", token)
	u.RawQuery = q.Encode()
	req, err := http.NewRequest(http.MethodPost, u.String(), nil)
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") && string(body) == token
}

func subscriptionBody(s *GraphSubscription) []byte {
	b, _ := json.Marshal(map[string]any{
		"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#subscriptions/$entity",
		"id":             s.ID, "resource": s.Resource, "changeType": s.ChangeType, "clientState": s.ClientState,
		"notificationUrl": s.NotificationURL, "lifecycleNotificationUrl": nullIfEmpty(s.LifecycleURL),
		"expirationDateTime": s.Expires.UTC().Format(time.RFC3339Nano), "applicationId": "graph-client",
		"creatorId": "8ee44408-0679-472c-bc2a-692812af3437", "latestSupportedTlsVersion": "v1_2",
	})
	return b
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// tellChanges sends a notification to every live subscription of a drive
// that changed since the last look.
func (g *Graph) tellChanges(now time.Time) time.Time {
	g.mu.Lock()
	g.sweepLocked(now)
	var due []GraphSubscription
	for id, t := range g.drives {
		if !t.dirty.Swap(false) {
			continue
		}
		for _, s := range g.subs {
			if s.drive == id && !s.Reauthorize {
				due = append(due, *s)
			}
		}
	}
	g.mu.Unlock()
	for _, s := range due {
		body, _ := json.Marshal(map[string]any{"value": []map[string]any{{
			"subscriptionId": s.ID, "subscriptionExpirationDateTime": s.Expires.UTC().Format(time.RFC3339Nano),
			"changeType": "updated", "resource": s.Resource, "clientState": s.ClientState, "tenantId": GraphTenantID,
			"resourceData": nil}}})
		status, _ := postJSON(s.NotificationURL, body, nil)
		g.mu.Lock()
		if cur := g.subs[s.ID]; cur != nil {
			cur.Told++
			if status/100 != 2 {
				cur.Failed++
			}
		}
		g.mu.Unlock()
	}
	return time.Time{}
}

// postJSON posts body to target with header, answering the status (0
// when it could not be reached).
func postJSON(target string, body []byte, header http.Header) (int, error) {
	req, err := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := pushClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// newGUID is a random id in the GUID form Graph and Drive use.
func newGUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
