package googledrive_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/google_drive"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/practice/changes"
)

// A channel on the changes feed is made with the gateway's token; its
// sync message wakes nothing, a change wakes the sync, and a message
// whose channel or token is not the drive's is refused and wakes nothing.
// The channel is replaced after a day (the old one stopped), which also
// makes good a channel Drive dropped without a word.
func TestChannelIsMadeCheckedAndReplaced(t *testing.T) {
	d := vendortest.NewGDrive()
	t.Cleanup(d.Close)
	var woken atomic.Int32
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	clock := vendortest.NewClock(time.Now())
	a, err := googledrive.New(googledrive.Config{Firm: "frm_acme", BaseURL: d.URL, OAuth2: upstream.OAuth2Config{AccessToken: d.Token},
		NotificationURL: srv.URL + "/ingest/frm_acme/google_drive", Upstream: upstream.Policy{RateLimit: -1, MaxAttempts: 1}},
		upstream.Deps{Clock: clock, State: changes.NewMemoryState(), Wake: func(context.Context) error { woken.Add(1); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	h = a.Webhook(nil)
	ctx := context.Background()
	until, err := a.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chs := d.Channels()
	if len(chs) != 1 || len(chs[0].Token) != 64 || time.Until(until) < 6*24*time.Hour {
		t.Fatalf("channels %+v, until %s", chs, until)
	}
	eventually.True(t, 10*time.Second, 10*time.Millisecond, "the sync message", func() bool { return d.Channels()[0].Messages == 1 })
	if woken.Load() != 0 || d.Channels()[0].Failed != 0 {
		t.Fatalf("the sync message: %d wakes, %d failed", woken.Load(), d.Channels()[0].Failed)
	}
	d.AddFile("/Clients/Acme/Tax return.pdf", 10, "application/pdf", time.Now())
	eventually.True(t, 10*time.Second, 10*time.Millisecond, "the sync woken", func() bool { return woken.Load() == 1 })

	for name, hdr := range map[string][2]string{"forged token": {chs[0].ID, "not-the-token"}, "other channel": {"pgw-other", chs[0].Token}} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		req.Header.Set("X-Goog-Channel-ID", hdr[0])
		req.Header.Set("X-Goog-Channel-Token", hdr[1])
		req.Header.Set("X-Goog-Resource-State", "change")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, resp.StatusCode)
		}
	}
	if woken.Load() != 1 {
		t.Fatalf("refused messages woke the sync: %d", woken.Load())
	}

	d.DropChannel(chs[0].ID)
	clock.Advance(25 * time.Hour)
	if _, err := a.Subscribe(ctx); err != nil {
		t.Fatal(err)
	}
	again := d.Channels()
	if len(again) != 1 || again[0].ID == chs[0].ID {
		t.Fatalf("after a day: channels %+v", again)
	}
	clock.Advance(25 * time.Hour)
	if _, err := a.Subscribe(ctx); err != nil {
		t.Fatal(err)
	}
	if last := d.Channels(); len(last) != 1 || last[0].ID == again[0].ID {
		t.Fatalf("a channel replaced leaves the old one stopped: %+v", last)
	}
}
