package dropbox_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/dropbox"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
)

// The firm's Dropbox webhook answers Dropbox's verification challenge as
// Dropbox asks (the double registers it only then); a change in the
// firm's account wakes its sync, a notification naming other accounts
// alone wakes nothing, and one not signed with the app secret is refused.
func TestWebhookChallengeSignatureAndAccounts(t *testing.T) {
	d := vendortest.NewDropbox()
	t.Cleanup(d.Close)
	var woken atomic.Int32
	a, err := dropbox.New(dropbox.Config{Firm: "frm_acme", BaseURL: d.URL, OAuth2: upstream.OAuth2Config{AccessToken: d.Token},
		AppSecret: d.Identity.ClientSecret, Upstream: upstream.Policy{RateLimit: -1, MaxAttempts: 1}},
		upstream.Deps{Wake: func(context.Context) error { woken.Add(1); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Webhook(nil))
	t.Cleanup(srv.Close)
	if err := d.RegisterWebhook(srv.URL + "/ingest/frm_acme/dropbox"); err != nil {
		t.Fatal(err)
	}
	d.AddFile("/Clients/Acme/Letter.pdf", 10, time.Now())
	eventually.True(t, 10*time.Second, 10*time.Millisecond, "the sync woken", func() bool { return woken.Load() == 1 })

	d.NotifyAccounts("dbid:someone-else", "dbid:another")
	eventually.True(t, 10*time.Second, 10*time.Millisecond, "the notification answered", func() bool { sent, _ := d.Notified(); return sent == 2 })
	d.NotifyAccounts("dbid:someone-else", d.AccountID)
	eventually.True(t, 10*time.Second, 10*time.Millisecond, "the firm's among others", func() bool { return woken.Load() == 2 })
	if _, failed := d.Notified(); failed != 0 {
		t.Fatalf("%d notifications not answered 2xx", failed)
	}

	body := `{"list_folder":{"accounts":["` + d.AccountID + `"]},"delta":{"users":[1]}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	req.Header.Set("X-Dropbox-Signature", vendortest.SignDropbox("not-the-secret", []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || woken.Load() != 2 {
		t.Fatalf("a forged notification: %d, %d wakes", resp.StatusCode, woken.Load())
	}
}

// The connect app's one address: its verification request is answered,
// and a notification's signature is checked with the app's secret before
// its accounts are named for the gateway to hand it to their firms.
func TestAppRoutesByAccount(t *testing.T) {
	app := &dropbox.App{}
	app.ClientSecret = "app-secret"
	body := []byte(`{"list_folder":{"accounts":["dbid:a","dbid:b"]},"delta":{"users":[1,2]}}`)
	accounts, err := app.Route(http.Header{"X-Dropbox-Signature": {vendortest.SignDropbox("app-secret", body)}}, body)
	if err != nil || strings.Join(accounts, ",") != "dbid:a,dbid:b" {
		t.Fatalf("routed %v, %v", accounts, err)
	}
	if _, err := app.Route(http.Header{"X-Dropbox-Signature": {vendortest.SignDropbox("other", body)}}, body); err == nil {
		t.Fatal("a forged notification was routed")
	}
	w := httptest.NewRecorder()
	if !app.Challenge(w, httptest.NewRequest(http.MethodGet, "/connect/webhooks/dropbox?challenge=abc", nil)) ||
		w.Body.String() != "abc" || w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("challenge: %d %q %v", w.Code, w.Body, w.Header())
	}
}
