package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Cookies. Both are scoped to the console's path, so the /v1 API never
// sees them.
const (
	sessionCookie = "pgw_console"
	// signinCookie carries a nonce that ties the sign-in form to the
	// browser that loaded it (login CSRF).
	signinCookie = "pgw_console_signin"
	cookiePath   = "/console"
)

var (
	errNoSession = errors.New("no console session")
	errTampered  = errors.New("console session cookie does not verify")
	errExpired   = errors.New("console session has expired")
)

// signer signs cookie values and derives CSRF tokens. Its key never leaves
// the process.
type signer struct {
	key []byte
}

func newSigner() (signer, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return signer{}, fmt.Errorf("drawing the console session key: %w", err)
	}
	return signer{key: key}, nil
}

func (s signer) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, s.key)
	for _, p := range parts {
		// Length-prefixed so that no two part lists sign alike.
		m.Write([]byte(strconv.Itoa(len(p))))
		m.Write([]byte{':'})
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

var b64 = base64.RawURLEncoding

// session is what the cookie says: who signed in, which server-side state
// is theirs, and until when. It holds no token.
type session struct {
	ID      string // random; names the server-side state
	CredID  string // the admin credential that signed in
	Expires time.Time
}

// encode renders the cookie value: payload.signature, both base64url.
func (s signer) encode(sess session) string {
	payload := strings.Join([]string{"v1", sess.CredID, sess.ID, strconv.FormatInt(sess.Expires.Unix(), 10)}, "|")
	return b64.EncodeToString([]byte(payload)) + "." + b64.EncodeToString(s.mac("session", payload))
}

// decode verifies a cookie value and returns the session it names. An
// expired session is returned with errExpired, so that its state can be
// dropped.
func (s signer) decode(value string, now time.Time) (session, error) {
	p64, sig64, ok := strings.Cut(value, ".")
	if !ok {
		return session{}, errTampered
	}
	payload, err1 := b64.DecodeString(p64)
	sig, err2 := b64.DecodeString(sig64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, s.mac("session", string(payload))) {
		return session{}, errTampered
	}
	f := strings.Split(string(payload), "|")
	if len(f) != 4 || f[0] != "v1" {
		return session{}, errTampered
	}
	exp, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return session{}, errTampered
	}
	sess := session{CredID: f[1], ID: f[2], Expires: time.Unix(exp, 0)}
	if !now.Before(sess.Expires) {
		return sess, errExpired
	}
	return sess, nil
}

// csrf is the per-session token every console form carries.
func (s signer) csrf(sessionID string) string {
	return b64.EncodeToString(s.mac("csrf", sessionID))
}

// checkCSRF reports whether token is the session's CSRF token.
func (s signer) checkCSRF(sessionID, token string) bool {
	got, err := b64.DecodeString(token)
	return err == nil && sessionID != "" && hmac.Equal(got, s.mac("csrf", sessionID))
}

// signinToken ties a sign-in form to the nonce in the browser's
// signinCookie.
func (s signer) signinToken(nonce string) string {
	return b64.EncodeToString(s.mac("signin", nonce))
}

func (s signer) checkSignin(nonce, token string) bool {
	got, err := b64.DecodeString(token)
	return err == nil && nonce != "" && hmac.Equal(got, s.mac("signin", nonce))
}

func randomID() string {
	b := make([]byte, 18)
	rand.Read(b)
	return b64.EncodeToString(b)
}

// flash is a one-time message shown on the next page.
type flash struct {
	Kind     string // ok, warn, bad
	Text     string
	Link     string
	LinkText string
}

// explorerCredential is the sandbox credential a session's request
// explorer uses. Its token lives only here, in memory.
type explorerCredential struct {
	ID    string
	token string
}

// sessionState is what the server keeps for a signed-in session.
type sessionState struct {
	credID   string
	firm     string
	expires  time.Time
	explorer *explorerCredential
	flashes  []flash
	// issued holds tokens of credentials just issued until their page is
	// shown once.
	issued map[string]string
}

// sessions holds the server-side state of every console session in this
// process. It lives in a caddy.UsagePool so a config reload does not sign
// everyone out; a restart does (the key is per process).
type sessions struct {
	signer
	mu    sync.Mutex
	byID  map[string]*sessionState
	swept time.Time
}

// pool keeps sessions across config reloads.
var pool = caddy.NewUsagePool()

const poolKey = "practicegw_console.sessions"

func loadSessions() (*sessions, error) {
	v, _, err := pool.LoadOrNew(poolKey, func() (caddy.Destructor, error) {
		sg, err := newSigner()
		if err != nil {
			return nil, err
		}
		return &sessions{signer: sg, byID: map[string]*sessionState{}}, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*sessions), nil
}

// Destruct forgets every session; explorer credentials left behind are
// revoked by the next sweepOrphans, since none outlives a session.
func (s *sessions) Destruct() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.byID)
	return nil
}

func (s *sessions) start(credID, firm string, expires time.Time) session {
	sess := session{ID: randomID(), CredID: credID, Expires: expires}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[sess.ID] = &sessionState{credID: credID, firm: firm, expires: expires, issued: map[string]string{}}
	return sess
}

// valid reports whether the server still holds the session the cookie
// names: a signed-out session's cookie is dead even if replayed.
func (s *sessions) valid(sess session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byID[sess.ID]
	return ok && st.credID == sess.CredID
}

// end forgets a session and returns its explorer credential, if any, for
// the caller to revoke.
func (s *sessions) end(id string) *explorerCredential {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byID[id]
	if !ok {
		return nil
	}
	delete(s.byID, id)
	return st.explorer
}

// sweep forgets expired sessions, at most once a minute, and returns their
// explorer credentials for the caller to revoke.
func (s *sessions) sweep(now time.Time) []*explorerCredential {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.swept) < time.Minute {
		return nil
	}
	s.swept = now
	var out []*explorerCredential
	for id, st := range s.byID {
		if !now.Before(st.expires) {
			if st.explorer != nil {
				out = append(out, st.explorer)
			}
			delete(s.byID, id)
		}
	}
	return out
}

// holds reports whether a live session uses the explorer credential id.
func (s *sessions) holds(credID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.byID {
		if st.explorer != nil && st.explorer.ID == credID {
			return true
		}
	}
	return false
}

func (s *sessions) explorer(id string) (*explorerCredential, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byID[id]
	if !ok || st.explorer == nil {
		return nil, false
	}
	return st.explorer, true
}

// setExplorer records the session's explorer credential and returns the
// one it replaces (a concurrent first use may issue two), to be revoked.
func (s *sessions) setExplorer(id string, c *explorerCredential) (replaced *explorerCredential, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	replaced, st.explorer = st.explorer, c
	return replaced, true
}

func (s *sessions) addFlash(id string, f flash) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.byID[id]; ok {
		st.flashes = append(st.flashes, f)
	}
}

func (s *sessions) takeFlashes(id string) []flash {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byID[id]
	if !ok {
		return nil
	}
	out := st.flashes
	st.flashes = nil
	return out
}

func (s *sessions) putIssued(id, credID, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.byID[id]; ok {
		st.issued[credID] = token
	}
}

// takeIssued returns a just-issued token once.
func (s *sessions) takeIssued(id, credID string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byID[id]
	if !ok {
		return "", false
	}
	tok, ok := st.issued[credID]
	delete(st.issued, credID)
	return tok, ok
}
