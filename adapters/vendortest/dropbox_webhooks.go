package vendortest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// Dropbox's webhooks, as Dropbox publishes them: the app's one webhook
// URI, registered in the App Console (RegisterWebhook), is first sent a
// verification request, a GET with a challenge parameter that it must
// echo back (200, the challenge as a text/plain body, with
// X-Content-Type-Options: nosniff) within ten seconds, or Dropbox sends
// it nothing. Then each change in an account linked to the app is told
// by a POST of {"list_folder": {"accounts": [...]}, "delta": {"users":
// [...]}}, signed in X-Dropbox-Signature (the hex HMAC-SHA256 of the body
// under the app secret); several accounts' changes may come in one. The
// notification names accounts, never files: the receiver reads its
// cursor. The double's files are AccountID's.

// SignDropbox is X-Dropbox-Signature: the hex HMAC-SHA256 of the body
// under the app secret.
func SignDropbox(appSecret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(appSecret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// RegisterWebhook registers uri as the app's webhook, as the App Console
// does: Dropbox's verification request first, which it must pass.
func (d *Dropbox) RegisterWebhook(uri string) error {
	challenge := "chg-" + newGUID()
	u, err := url.Parse(uri)
	if err != nil {
		return err
	}
	q := u.Query()
	q.Set("challenge", challenge)
	u.RawQuery = q.Encode()
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(u.String())
	if err != nil {
		return fmt.Errorf("dropbox double: webhook verification: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	switch {
	case resp.StatusCode != http.StatusOK || string(body) != challenge:
		return fmt.Errorf("dropbox double: webhook verification answered %d %q, want the challenge", resp.StatusCode, body)
	case resp.Header.Get("Content-Type") != "text/plain" && resp.Header.Get("Content-Type") != "text/plain; charset=utf-8":
		return fmt.Errorf("dropbox double: webhook verification answered as %q, want text/plain", resp.Header.Get("Content-Type"))
	case resp.Header.Get("X-Content-Type-Options") != "nosniff":
		return fmt.Errorf("dropbox double: webhook verification without X-Content-Type-Options: nosniff")
	}
	d.hookMu.Lock()
	d.hooks = append(d.hooks, uri)
	d.hookMu.Unlock()
	d.push.poke()
	return nil
}

// NotifyAccounts tells the app's webhooks of changes in the accounts
// named, in one notification, as Dropbox may.
func (d *Dropbox) NotifyAccounts(accounts ...string) {
	d.hookMu.Lock()
	d.extra = append(d.extra, accounts...)
	d.hookMu.Unlock()
	d.push.poke()
}

// Notified counts the notifications sent, and those not answered 2xx.
func (d *Dropbox) Notified() (sent, failed int) {
	d.hookMu.Lock()
	defer d.hookMu.Unlock()
	return d.sent, d.failed
}

// tellChanges tells the webhooks of the account whose files changed
// since the last look, and the accounts NotifyAccounts named.
func (d *Dropbox) tellChanges(time.Time) time.Time {
	var accounts []string
	if d.tree.dirty.Swap(false) {
		accounts = append(accounts, d.AccountID)
	}
	d.hookMu.Lock()
	accounts = append(accounts, d.extra...)
	d.extra = nil
	hooks := append([]string(nil), d.hooks...)
	d.hookMu.Unlock()
	if len(accounts) == 0 || len(hooks) == 0 {
		return time.Time{}
	}
	users := make([]int, len(accounts))
	for i := range accounts {
		users[i] = 12345678 + i
	}
	body, _ := json.Marshal(map[string]any{"list_folder": map[string]any{"accounts": accounts}, "delta": map[string]any{"users": users}})
	h := http.Header{"X-Dropbox-Signature": {SignDropbox(d.Identity.ClientSecret, body)}}
	for _, hook := range hooks {
		status, _ := postJSON(hook, body, h)
		d.hookMu.Lock()
		d.sent++
		if status/100 != 2 {
			d.failed++
		}
		d.hookMu.Unlock()
	}
	return time.Time{}
}
