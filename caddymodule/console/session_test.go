package console

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func testSigner(t *testing.T) signer {
	t.Helper()
	s, err := newSigner()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSessionCookieRoundTrip(t *testing.T) {
	s := testSigner(t)
	now := time.Unix(1_800_000_000, 0)
	sess := session{ID: "sid123", CredID: "crd_abc", Expires: now.Add(12 * time.Hour)}
	v := s.encode(sess)
	if strings.Contains(v, "pgw_") {
		t.Fatalf("cookie %q looks like it carries a token", v)
	}
	got, err := s.decode(v, now)
	if err != nil || got.ID != sess.ID || got.CredID != sess.CredID || !got.Expires.Equal(sess.Expires) {
		t.Fatalf("decode: %+v, %v", got, err)
	}
}

func TestSessionCookieTamperAndExpiry(t *testing.T) {
	s := testSigner(t)
	now := time.Unix(1_800_000_000, 0)
	v := s.encode(session{ID: "sid123", CredID: "crd_abc", Expires: now.Add(time.Hour)})
	payload, sig, _ := strings.Cut(v, ".")
	forged := b64.EncodeToString([]byte("v1|crd_other|sid123|" + "9999999999"))

	for name, value := range map[string]string{
		"other credential":  forged + "." + sig,
		"flipped signature": payload + "." + flipFirst(sig),
		"no signature":      payload,
		"garbage":           "not-a-cookie",
		"other key":         testSigner(t).encode(session{ID: "sid123", CredID: "crd_abc", Expires: now.Add(time.Hour)}),
	} {
		if _, err := s.decode(value, now); !errors.Is(err, errTampered) {
			t.Errorf("%s: got %v, want errTampered", name, err)
		}
	}
	if _, err := s.decode(v, now.Add(time.Hour)); !errors.Is(err, errExpired) {
		t.Errorf("at expiry: got %v, want errExpired", err)
	}
}

func TestCSRF(t *testing.T) {
	s := testSigner(t)
	tok := s.csrf("sid-a")
	if !s.checkCSRF("sid-a", tok) {
		t.Fatal("the session's own token is refused")
	}
	for name, c := range map[string]struct{ sid, tok string }{
		"other session": {"sid-b", tok},
		"empty token":   {"sid-a", ""},
		"no session":    {"", s.csrf("")},
		"other key":     {"sid-a", testSigner(t).csrf("sid-a")},
	} {
		if s.checkCSRF(c.sid, c.tok) {
			t.Errorf("%s: accepted", name)
		}
	}
	if n := "nonce"; !s.checkSignin(n, s.signinToken(n)) || s.checkSignin("other", s.signinToken(n)) {
		t.Error("sign-in form tokens are not tied to their nonce")
	}
}

func TestSignedOutSessionIsDead(t *testing.T) {
	ss := &sessions{signer: testSigner(t), byID: map[string]*sessionState{}}
	sess := ss.start("crd_abc", "frm_acme", time.Now().Add(time.Hour))
	ss.setExplorer(sess.ID, &explorerCredential{ID: "crd_sandbox", token: "pgw_test_x"})
	if !ss.valid(sess) {
		t.Fatal("a new session is not valid")
	}
	if ex := ss.end(sess.ID); ex == nil || ex.ID != "crd_sandbox" {
		t.Fatalf("ending the session returned %v, want its explorer credential to revoke", ex)
	}
	if ss.valid(sess) {
		t.Fatal("a signed-out session's cookie still works")
	}
}

// flipFirst changes the first character of a base64 string to another
// base64 character, so the decoded bytes always differ.
func flipFirst(s string) string {
	c := byte('A')
	if s[0] == 'A' {
		c = 'B'
	}
	return string(c) + s[1:]
}
