package sharepoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/subscription"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// Microsoft Graph's change notifications on the drive: a subscription on
// the drive's root (changeType updated, the one driveItem takes) made
// when the system's sync first holds it, notifying Config.NotificationURL
// (its lifecycle notifications too), carrying a clientState of 32 random
// bytes kept sealed in the upstream state store. It is asked for two days
// and renewed (PATCH) when less than one is left, confirmed with Graph
// every hour (a subscription Graph dropped answers 404 and is made
// again), and made again at once when a lifecycle notification says
// reauthorizationRequired. A notification names no item: it wakes the
// sync, whose holder reads the delta. Graph answers a validation request
// before it makes a subscription, and the receiver echoes it.

// How long a subscription is asked for, when it is renewed and how often
// Graph is asked whether it still has it.
const (
	subscriptionLife  = 48 * time.Hour
	subscriptionRenew = 24 * time.Hour
	subscriptionCheck = time.Hour
)

// graphVendor makes the drive's subscriptions.
type graphVendor struct{ a *Adapter }

type graphSubscription struct {
	ID                 string    `json:"id"`
	ExpirationDateTime time.Time `json:"expirationDateTime"`
}

func (v graphVendor) Create(ctx context.Context, address, secret string, until time.Time) (subscription.Subscription, error) {
	drive, err := v.a.driveID(ctx)
	if err != nil {
		return subscription.Subscription{}, err
	}
	body, _ := json.Marshal(map[string]string{
		"changeType": "updated", "notificationUrl": address, "lifecycleNotificationUrl": address,
		"resource": "/drives/" + drive + "/root", "expirationDateTime": until.UTC().Format(time.RFC3339),
		"clientState": secret,
	})
	var s graphSubscription
	if _, err := v.a.c.JSON(ctx, upstream.Request{Method: http.MethodPost, Path: "/subscriptions", Body: body}, "subscription", &s); err != nil {
		return subscription.Subscription{}, fmt.Errorf("graph: subscribe to the drive's changes: %w", err)
	}
	if s.ID == "" {
		return subscription.Subscription{}, upstream.Malformed(v.a.c.Label(), "subscription", errors.New("no id"))
	}
	return subscription.Subscription{ID: s.ID, Expires: s.ExpirationDateTime}, nil
}

func (v graphVendor) Renew(ctx context.Context, s subscription.Subscription, until time.Time) (subscription.Subscription, error) {
	body, _ := json.Marshal(map[string]string{"expirationDateTime": until.UTC().Format(time.RFC3339)})
	var out graphSubscription
	_, err := v.a.c.JSON(ctx, upstream.Request{Method: http.MethodPatch, Path: "/subscriptions/" + url.PathEscape(s.ID), Body: body},
		"subscription", &out)
	if errors.Is(err, practice.ErrNotFound) {
		return s, subscription.ErrGone
	}
	if err != nil {
		return s, fmt.Errorf("graph: renew the subscription: %w", err)
	}
	s.Expires = out.ExpirationDateTime
	return s, nil
}

func (v graphVendor) Exists(ctx context.Context, s subscription.Subscription) (bool, error) {
	_, err := v.a.c.Do(ctx, upstream.Request{Path: "/subscriptions/" + url.PathEscape(s.ID)})
	if errors.Is(err, practice.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (v graphVendor) Delete(ctx context.Context, s subscription.Subscription) error {
	_, err := v.a.c.Do(ctx, upstream.Request{Method: http.MethodDelete, Path: "/subscriptions/" + url.PathEscape(s.ID)})
	if errors.Is(err, practice.ErrNotFound) {
		return nil
	}
	return err
}

// Subscribe keeps the drive's subscription alive, for the sync's holder
// (readmodel.Subscriber): answers when it lapses, zero without a
// notification address.
func (a *Adapter) Subscribe(ctx context.Context) (time.Time, error) { return a.keeper.Keep(ctx) }

// notification is one of Graph's change or lifecycle notifications.
type notification struct {
	SubscriptionID string `json:"subscriptionId"`
	ClientState    string `json:"clientState"`
	LifecycleEvent string `json:"lifecycleEvent"`
}

// Webhook is the receiver of Graph's notifications on the drive: it
// answers a validation request (?validationToken=) with the token, as
// Graph requires before it makes a subscription; takes a notification
// only when its subscription and clientState are the drive's (401
// otherwise: nothing is woken), waking the sync to read the delta; and a
// lifecycle notification makes the subscription again. Graph wants an
// answer within seconds: nothing is read before it is answered 202.
func (a *Adapter) Webhook(changes.ChangeSink) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if token, ok := r.URL.Query()["validationToken"]; ok {
			validate(w, token)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		var in struct {
			Value []notification `json:"value"`
		}
		if json.Unmarshal(body, &in) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		taken, wake := 0, false
		for _, n := range in.Value {
			ok, err := a.keeper.Verify(ctx, n.SubscriptionID, n.ClientState)
			if err != nil {
				a.log.Error("graph notification not checked; Graph will send it again", zap.Error(err))
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			if !ok {
				continue
			}
			taken++
			switch n.LifecycleEvent {
			case "":
				wake = true
			case "missed":
				// Notifications were dropped: the delta has them.
				wake = true
			default: // reauthorizationRequired, subscriptionRemoved
				if err := a.keeper.Lost(ctx, n.SubscriptionID); err != nil {
					a.log.Error("graph subscription not marked to be made again", zap.Error(err))
				}
				wake = true
			}
		}
		if taken == 0 {
			a.log.Warn("graph notification refused: no subscription of this drive with its clientState", zap.String("remote", r.RemoteAddr))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if wake && a.wake != nil {
			if err := a.wake(ctx); err != nil {
				// Answered all the same: the next poll reads the delta.
				a.log.Warn("sync not woken by a graph notification; the next poll reads the delta", zap.Error(err))
			}
		}
		w.WriteHeader(http.StatusAccepted)
	})
}

// validate answers Graph's validation request: the token as it came
// (decoded from the query), as text/plain, within Graph's 10 s.
func validate(w http.ResponseWriter, token []string) {
	if len(token) != 1 || len(token[0]) > 4096 {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, token[0])
}
