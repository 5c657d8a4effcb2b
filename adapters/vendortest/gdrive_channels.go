package vendortest

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"time"
)

// Google Drive's push notifications on changes, as Drive publishes them:
// POST /drive/v3/changes/watch?pageToken=... with a channel (id, type
// "web_hook", address, an optional token and expiration in Unix
// milliseconds: at most a week ahead, an hour when left out) answers the
// channel with its resourceId and expiration, and sends the address a
// "sync" message at once; each change after is told as a "change"
// message: a POST with no body and the X-Goog-Channel-ID,
// X-Goog-Channel-Token, X-Goog-Channel-Expiration, X-Goog-Resource-ID,
// X-Goog-Resource-URI, X-Goog-Resource-State and X-Goog-Message-Number
// headers. A channel past its expiration is gone; POST
// /drive/v3/channels/stop {id, resourceId} ends one. Drive renews no
// channel: a new one is made before the old lapses.

// DriveMaxChannel is the longest a channel on changes lives, and
// driveDefaultChannel how long one asked for no expiration lives.
const (
	DriveMaxChannel     = 7 * 24 * time.Hour
	driveDefaultChannel = time.Hour
)

// DriveChannel is one notification channel at the double.
type DriveChannel struct {
	ID, ResourceID, Address, Token string
	Expires                        time.Time
	// Messages counts the messages sent (the sync among them), Failed
	// those not answered 2xx.
	Messages, Failed int
}

// Channels are the live channels.
func (d *GDrive) Channels() []DriveChannel {
	d.chMu.Lock()
	defer d.chMu.Unlock()
	d.sweepChannels(time.Now())
	var out []DriveChannel
	for _, c := range d.channels {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// DropChannel ends a channel without a word.
func (d *GDrive) DropChannel(id string) {
	d.chMu.Lock()
	defer d.chMu.Unlock()
	delete(d.channels, id)
}

// sweepChannels forgets channels past their expiration; d.chMu is held.
func (d *GDrive) sweepChannels(now time.Time) {
	for id, c := range d.channels {
		if !now.Before(c.Expires) {
			delete(d.channels, id)
		}
	}
}

// watch serves changes.watch.
func (d *GDrive) watch(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Query().Get("pageToken") == "" {
		driveError(w, http.StatusBadRequest, "required", "Required parameter: pageToken")
		return
	}
	var in struct {
		ID         string `json:"id"`
		Type       string `json:"type"`
		Address    string `json:"address"`
		Token      string `json:"token"`
		Expiration string `json:"expiration"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.ID == "" || in.Address == "" {
		driveError(w, http.StatusBadRequest, "required", "Required: channel id and address")
		return
	}
	if in.Type != "web_hook" && in.Type != "webhook" {
		driveError(w, http.StatusBadRequest, "invalid", "Invalid value for channel type")
		return
	}
	now := time.Now()
	expires := now.Add(driveDefaultChannel)
	if in.Expiration != "" {
		ms, err := strconv.ParseInt(in.Expiration, 10, 64)
		if err != nil {
			driveError(w, http.StatusBadRequest, "invalid", "Invalid value for expiration")
			return
		}
		expires = time.UnixMilli(ms)
		if !expires.After(now) {
			driveError(w, http.StatusBadRequest, "invalid", "Invalid value for expiration")
			return
		}
		expires = minTime(expires, now.Add(DriveMaxChannel))
	}
	d.chMu.Lock()
	if d.channels == nil {
		d.channels = map[string]*DriveChannel{}
	}
	if _, taken := d.channels[in.ID]; taken {
		d.chMu.Unlock()
		driveError(w, http.StatusBadRequest, "channelIdNotUnique", "Channel id not unique")
		return
	}
	c := &DriveChannel{ID: in.ID, ResourceID: "rsc-" + newGUID(), Address: in.Address, Token: in.Token, Expires: expires}
	d.channels[c.ID] = c
	d.syncs = append(d.syncs, c.ID)
	d.chMu.Unlock()
	b, _ := json.Marshal(map[string]any{"kind": "api#channel", "id": c.ID, "resourceId": c.ResourceID,
		"resourceUri": d.URL + "/changes?alt=json&pageToken=" + r.URL.Query().Get("pageToken"),
		"token":       c.Token, "expiration": strconv.FormatInt(c.Expires.UnixMilli(), 10)})
	writeJSON(w, http.StatusOK, b)
	d.push.poke()
}

// stop serves channels.stop.
func (d *GDrive) stop(w http.ResponseWriter, r *http.Request) {
	var in struct{ ID, ResourceID string }
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&in) != nil {
		driveError(w, http.StatusBadRequest, "invalid", "Invalid Value")
		return
	}
	d.chMu.Lock()
	defer d.chMu.Unlock()
	c := d.channels[in.ID]
	if c == nil || c.ResourceID != in.ResourceID {
		driveError(w, http.StatusNotFound, "notFound", "Channel '"+in.ID+"' not found for project")
		return
	}
	delete(d.channels, in.ID)
	w.WriteHeader(http.StatusNoContent)
}

// tellChanges sends each new channel its sync message and every live
// channel a change message when the drive changed since the last look.
func (d *GDrive) tellChanges(now time.Time) time.Time {
	changed := d.tree.dirty.Swap(false)
	d.chMu.Lock()
	d.sweepChannels(now)
	type message struct {
		c     DriveChannel
		state string
		n     int
	}
	var out []message
	syncs := map[string]bool{}
	for _, id := range d.syncs {
		syncs[id] = true
	}
	d.syncs = nil
	for _, c := range d.channels {
		state := ""
		switch {
		case syncs[c.ID]:
			state = "sync"
		case changed:
			state = "change"
		default:
			continue
		}
		d.messages++
		out = append(out, message{*c, state, d.messages})
	}
	d.chMu.Unlock()
	for _, m := range out {
		h := http.Header{
			"X-Goog-Channel-Id":         {m.c.ID},
			"X-Goog-Channel-Expiration": {m.c.Expires.UTC().Format(http.TimeFormat)},
			"X-Goog-Resource-Id":        {m.c.ResourceID},
			"X-Goog-Resource-Uri":       {d.URL + "/changes?alt=json"},
			"X-Goog-Resource-State":     {m.state},
			"X-Goog-Message-Number":     {strconv.Itoa(m.n)},
		}
		if m.c.Token != "" {
			h.Set("X-Goog-Channel-Token", m.c.Token)
		}
		status, _ := postJSON(m.c.Address, nil, h)
		d.chMu.Lock()
		if cur := d.channels[m.c.ID]; cur != nil {
			cur.Messages++
			if status/100 != 2 {
				cur.Failed++
			}
		}
		d.chMu.Unlock()
	}
	return time.Time{}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
