package dropbox

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/kit/webhooksig"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// Dropbox's webhooks: the app's one webhook URI, which the operator
// registers in Dropbox's App Console, is first sent a verification
// request (a GET with a challenge, echoed back as text/plain with
// X-Content-Type-Options: nosniff); then Dropbox posts the accounts whose
// files changed, signed in X-Dropbox-Signature (the hex HMAC-SHA256 of
// the body under the app secret). A notification names accounts, never
// files: it wakes the sync of each firm whose account it names, whose
// holder reads the cursor.

// notice is Dropbox's notification body.
type notice struct {
	ListFolder struct {
		Accounts []string `json:"accounts"`
	} `json:"list_folder"`
}

// Accounts reads a verified notification's accounts.
func Accounts(body []byte) ([]string, error) {
	var n notice
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, err
	}
	return n.ListFolder.Accounts, nil
}

// Challenge answers Dropbox's verification request: the challenge echoed,
// as Dropbox asks, as text/plain that a browser may not read as anything
// else.
func Challenge(w http.ResponseWriter, challenge string) {
	if len(challenge) > 1024 {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, challenge)
}

// Webhook is the receiver of Dropbox's notifications for the firm's
// Dropbox: it answers the verification request, refuses 401 a body not
// signed with the app secret (AppSecret, else the OAuth client secret),
// and wakes the sync when the body names the firm's account (or when the
// account is not known yet). Nothing is read before it is answered:
// Dropbox wants an answer within ten seconds.
func (a *Adapter) Webhook(changes.ChangeSink) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret := a.appSecret()
		if secret == "" {
			// No secret, no notification is checked: the address is not
			// this system's webhook.
			w.WriteHeader(http.StatusNotFound)
			return
		}
		switch r.Method {
		case http.MethodGet:
			Challenge(w, r.URL.Query().Get("challenge"))
			return
		case http.MethodPost:
		default:
			w.Header().Set("Allow", "GET, POST")
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		if !webhooksig.ValidHMAC([]byte(secret), body, r.Header.Get("X-Dropbox-Signature")) {
			a.log.Warn("dropbox notification refused: bad signature", zap.String("remote", r.RemoteAddr))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		accounts, err := Accounts(body)
		if err != nil {
			a.log.Error("dropbox notification unreadable", zap.Error(err))
			w.WriteHeader(http.StatusOK)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if mine := a.accountID(ctx); mine == "" || slices.Contains(accounts, mine) {
			if a.wake != nil {
				if err := a.wake(ctx); err != nil {
					a.log.Warn("sync not woken by a dropbox notification; the next poll reads the cursor", zap.Error(err))
				}
			}
		}
		w.WriteHeader(http.StatusOK)
	})
}

// Notifies reports whether Dropbox tells the documents' changes: with an
// app secret to check its notifications (the operator registers the
// app's webhook).
func (a *Adapter) Notifies(k practice.Kind) bool {
	return k == practice.Documents && a.appSecret() != ""
}

func (a *Adapter) appSecret() string {
	if a.cfg.AppSecret != "" {
		return a.cfg.AppSecret
	}
	return a.cfg.OAuth2.ClientSecret
}

// accountID is the firm's Dropbox account (users/get_current_account),
// read once; "" while it cannot be read.
func (a *Adapter) accountID(ctx context.Context) string {
	if id := a.account.Load(); id != nil {
		return *id
	}
	var acct struct {
		AccountID string `json:"account_id"`
	}
	_, err := a.c.JSON(ctx, upstream.Request{Method: http.MethodPost, Path: "/2/users/get_current_account", Body: []byte("null"),
		Idempotent: true}, "account", &acct)
	if err != nil || acct.AccountID == "" {
		return ""
	}
	a.account.Store(&acct.AccountID)
	return acct.AccountID
}

// Receives reports whether the app can check Dropbox's notifications: its
// secret is registered.
func (a *App) Receives() bool { return a.ClientSecret != "" }

// Challenge answers Dropbox's verification request of the app's webhook
// URI (a GET with a challenge): the gateway's address for every firm's
// Dropbox.
func (a *App) Challenge(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet || !r.URL.Query().Has("challenge") {
		return false
	}
	Challenge(w, r.URL.Query().Get("challenge"))
	return true
}

// Route checks a notification's signature with the app secret and names
// the accounts it is for. Dropbox's verification request is answered by
// the gateway's receiver before this.
func (a *App) Route(header http.Header, body []byte) ([]string, error) {
	if !webhooksig.ValidHMAC([]byte(a.ClientSecret), body, header.Get("X-Dropbox-Signature")) {
		return nil, firmsystem.ErrUnsigned
	}
	accounts, err := Accounts(body)
	if err != nil {
		return nil, errors.Join(errors.New("dropbox notification unreadable"), err)
	}
	return accounts, nil
}
