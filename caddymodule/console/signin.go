package console

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/internal/forwarded"
)

type signInView struct {
	Token   string // the form's anti-forgery token, not a credential
	Next    string
	Notice  string
	Problem string
}

var signInNotices = map[string]string{
	"expired":    "Your console session ended. Sign in again to carry on.",
	"revoked":    "The credential you signed in with was revoked or no longer has the admin scope.",
	"signed-out": "You have signed out. The sandbox credential the explorer used, if any, was revoked with your session.",
}

func (h *Handler) signInPage(w http.ResponseWriter, r *http.Request, _ *visit) error {
	if v, err := h.visit(r); err == nil && v != nil {
		return redirect(w, r, "/console")
	}
	h.renderSignIn(w, r, http.StatusOK, signInView{Next: localPath(r.URL.Query().Get("next")),
		Notice: signInNotices[r.URL.Query().Get("reason")]})
	return nil
}

// renderSignIn shows the sign-in form, tying it to a nonce cookie so that
// another site cannot sign this browser in as someone else.
func (h *Handler) renderSignIn(w http.ResponseWriter, r *http.Request, status int, view signInView) {
	nonce := ""
	if ck, err := r.Cookie(signinCookie); err == nil && ck.Value != "" {
		nonce = ck.Value
	} else {
		nonce = randomID()
		http.SetCookie(w, &http.Cookie{Name: signinCookie, Value: nonce, Path: cookiePath, HttpOnly: true,
			Secure: forwarded.HTTPS(r), SameSite: http.SameSiteStrictMode, MaxAge: 3600})
	}
	view.Token = h.sessions.signinToken(nonce)
	h.render(w, r, nil, status, "signin", "Sign in", view)
}

func (h *Handler) signIn(w http.ResponseWriter, r *http.Request, _ *visit) error {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		return pageErr(http.StatusBadRequest, "That form could not be read", "The sign-in form was too large or malformed.")
	}
	next := localPath(r.PostForm.Get("next"))
	again := func(status int, problem string) error {
		h.renderSignIn(w, r, status, signInView{Next: next, Problem: problem})
		return nil
	}
	ck, err := r.Cookie(signinCookie)
	if err != nil || !sameOrigin(r) || !h.sessions.checkSignin(ck.Value, r.PostForm.Get("form_token")) {
		return again(http.StatusForbidden, "The sign-in form expired. Paste the token again and sign in.")
	}
	// The token is read from the posted form only, never from the URL, and
	// is neither logged nor shown again.
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if token == "" {
		return again(http.StatusBadRequest, "Paste an admin credential's token to sign in.")
	}
	cred, err := h.registry.Authenticate(r.Context(), token)
	if err != nil {
		// The error names at most the credential id, but the reason is the
		// same to the visitor either way.
		h.logger.Info("console sign-in refused", zap.Error(err))
		return again(http.StatusUnauthorized,
			"That token was not accepted. Check that you copied all of it, and that the credential has not been revoked.")
	}
	firm, ok := h.firm(cred.Firm)
	switch {
	case !ok:
		return again(http.StatusForbidden, "This gateway does not serve the firm that credential belongs to.")
	case cred.Sandbox:
		return again(http.StatusForbidden,
			"That is a sandbox credential. The console administers the firm, so it needs a live credential with the admin scope.")
	case !cred.Allows("admin"):
		return again(http.StatusForbidden,
			"That credential works, but it lacks the admin scope the console needs. Ask your firm's administrator for an admin credential.")
	}
	now := h.now()
	sess := h.sessions.start(cred.ID, firm.ID, now.Add(time.Duration(h.SessionTTL)))
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: h.sessions.encode(sess), Path: cookiePath,
		Expires: sess.Expires, HttpOnly: true, Secure: forwarded.HTTPS(r), SameSite: http.SameSiteStrictMode})
	http.SetCookie(w, &http.Cookie{Name: signinCookie, Path: cookiePath, MaxAge: -1, HttpOnly: true,
		Secure: forwarded.HTTPS(r), SameSite: http.SameSiteStrictMode})
	h.logger.Info("console sign-in", zap.String("credential_id", cred.ID), zap.String("firm", firm.ID))
	h.tidy(r.Context(), firm.ID)
	if next == "" {
		next = "/console"
	}
	return redirect(w, r, next)
}

func (h *Handler) signOut(w http.ResponseWriter, r *http.Request, v *visit) error {
	h.endSession(r.Context(), v.sess.ID)
	h.clearSession(w, r)
	return redirect(w, r, "/console/sign-in?reason=signed-out")
}

func (h *Handler) clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: cookiePath, MaxAge: -1, HttpOnly: true,
		Secure: forwarded.HTTPS(r), SameSite: http.SameSiteStrictMode})
}

// toSignIn sends a visitor without a usable session to the sign-in page,
// remembering where they were going.
func (h *Handler) toSignIn(w http.ResponseWriter, r *http.Request, why error) {
	q := url.Values{}
	if r.Method == http.MethodGet && r.URL.Path != "/console" && r.URL.Path != "/console/" {
		q.Set("next", r.URL.RequestURI())
	}
	switch {
	case errors.Is(why, errRevoked):
		q.Set("reason", "revoked")
	case errors.Is(why, errExpired), errors.Is(why, errTampered):
		q.Set("reason", "expired")
	}
	to := "/console/sign-in"
	if len(q) > 0 {
		to += "?" + q.Encode()
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// localPath returns p if it is a console path, so that a sign-in link
// cannot send anyone elsewhere.
func localPath(p string) string {
	console := p == "/console" || strings.HasPrefix(p, "/console/") || strings.HasPrefix(p, "/console?")
	if !console || strings.ContainsAny(p, "\\\r\n") {
		return ""
	}
	u, err := url.Parse(p)
	if err != nil || u.Host != "" || u.Scheme != "" {
		return ""
	}
	return p
}

// tidy forgets expired sessions and revokes sandbox credentials the
// explorer no longer needs: those of expired sessions, and any left behind
// by a process that stopped (none can outlive a session).
func (h *Handler) tidy(ctx context.Context, firm string) {
	for _, ex := range h.sessions.sweep(h.now()) {
		h.revokeExplorer(ctx, ex)
	}
	creds, err := h.registry.List(ctx, firm)
	if err != nil {
		h.logger.Warn("listing credentials to tidy explorer credentials", zap.Error(err))
		return
	}
	for _, c := range creds {
		if c.Name == explorerName && c.Sandbox && c.RevokedAt == nil &&
			h.now().Sub(c.CreatedAt) > time.Duration(h.SessionTTL) && !h.sessions.holds(c.ID) {
			h.revokeExplorer(ctx, &explorerCredential{ID: c.ID})
		}
	}
}

func (h *Handler) revokeExplorer(ctx context.Context, ex *explorerCredential) {
	if _, err := h.registry.Revoke(context.WithoutCancel(ctx), ex.ID); err != nil {
		h.logger.Warn("revoking a console explorer credential", zap.String("credential_id", ex.ID), zap.Error(err))
	}
}
