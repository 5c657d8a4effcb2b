package googledrive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/subscription"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// Google Drive's push notifications on the changes feed: a channel
// (changes.watch) notifying Config.NotificationURL, carrying a token of
// 32 random bytes kept sealed in the upstream state store, made when the
// system's sync first holds it. Drive renews no channel, and says nothing
// when it drops one: a channel is asked for a week (Drive's longest on
// changes) and replaced after a day, the old one stopped
// (channels.stop), so that one lost is made good within a day, the polls
// finding its changes meanwhile. A message names no file: a "change"
// wakes the sync, whose holder reads the feed; the "sync" message a new
// channel begins with says nothing has changed.

// How long a channel is asked for, and when it is replaced.
const (
	channelLife    = 7 * 24 * time.Hour
	channelReplace = channelLife - 24*time.Hour
)

// driveVendor makes the changes feed's channels.
type driveVendor struct{ a *Adapter }

func (v driveVendor) Create(ctx context.Context, address, secret string, until time.Time) (subscription.Subscription, error) {
	q := v.a.query(url.Values{})
	q.Del("corpora")
	q.Del("includeItemsFromAllDrives")
	var start struct {
		StartPageToken string `json:"startPageToken"`
	}
	if _, err := v.a.c.JSON(ctx, upstream.Request{Path: "/changes/startPageToken", Query: q}, "start page token", &start); err != nil {
		return subscription.Subscription{}, fmt.Errorf("gdrive: watch changes: %w", err)
	}
	id := newChannelID()
	body, _ := json.Marshal(map[string]string{"id": id, "type": "web_hook", "address": address, "token": secret,
		"expiration": strconv.FormatInt(until.UnixMilli(), 10)})
	q.Set("pageToken", start.StartPageToken)
	var ch struct {
		ID         string `json:"id"`
		ResourceID string `json:"resourceId"`
		Expiration string `json:"expiration"`
	}
	if _, err := v.a.c.JSON(ctx, upstream.Request{Method: http.MethodPost, Path: "/changes/watch", Query: q, Body: body}, "channel", &ch); err != nil {
		return subscription.Subscription{}, fmt.Errorf("gdrive: watch changes: %w", err)
	}
	ms, err := strconv.ParseInt(ch.Expiration, 10, 64)
	if err != nil || ch.ID != id || ch.ResourceID == "" {
		return subscription.Subscription{}, upstream.Malformed(v.a.c.Label(), "channel", errors.New("not the channel asked for"))
	}
	return subscription.Subscription{ID: id, Resource: ch.ResourceID, Expires: time.UnixMilli(ms)}, nil
}

func (v driveVendor) Delete(ctx context.Context, s subscription.Subscription) error {
	body, _ := json.Marshal(map[string]string{"id": s.ID, "resourceId": s.Resource})
	_, err := v.a.c.Do(ctx, upstream.Request{Method: http.MethodPost, Path: "/channels/stop", Body: body})
	if errors.Is(err, practice.ErrNotFound) {
		return nil
	}
	return err
}

// newChannelID is a channel's id: Drive takes the caller's, unique in its
// project.
func newChannelID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "pgw-" + hex.EncodeToString(b)
}

// Subscribe keeps the changes feed's channel alive, for the sync's
// holder (readmodel.Subscriber): answers when it lapses, zero without a
// notification address.
func (a *Adapter) Subscribe(ctx context.Context) (time.Time, error) { return a.keeper.Keep(ctx) }

// Webhook is the receiver of Drive's push messages: one whose channel id
// and token are not the channel's (or the one it replaced) is refused
// 401 and wakes nothing; a "change" wakes the sync, a "sync" is
// acknowledged. Nothing is read before it is answered.
func (a *Adapter) Webhook(changes.ChangeSink) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		ok, err := a.keeper.Verify(ctx, r.Header.Get("X-Goog-Channel-ID"), r.Header.Get("X-Goog-Channel-Token"))
		switch {
		case err != nil:
			a.log.Error("drive notification not checked; Drive will send it again", zap.Error(err))
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case !ok:
			a.log.Warn("drive notification refused: not this drive's channel", zap.String("remote", r.RemoteAddr))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Header.Get("X-Goog-Resource-State") != "sync" && a.wake != nil {
			if err := a.wake(ctx); err != nil {
				a.log.Warn("sync not woken by a drive notification; the next poll reads the changes", zap.Error(err))
			}
		}
		w.WriteHeader(http.StatusOK)
	})
}
