package console

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// A console session re-reads its credential on every visit: once the
// credential it signed in with is revoked, the next page sends the
// administrator to sign in again, saying why.
func TestASessionEndsWhenItsCredentialIsRevoked(t *testing.T) {
	rg := newConsoleRig(t, "frm_acme", nil)
	if w := rg.do(t, http.MethodGet, "/console/access", nil); w.Code != http.StatusOK {
		t.Fatalf("before the revocation: %d", w.Code)
	}
	creds, err := rg.h.registry.List(context.Background(), "frm_acme")
	if err != nil || len(creds) != 1 {
		t.Fatalf("credentials %v, %v; want the administrator's alone", creds, err)
	}
	if _, err := rg.h.registry.Revoke(context.Background(), creds[0].ID); err != nil {
		t.Fatal(err)
	}
	w := rg.do(t, http.MethodGet, "/console/access", nil)
	if loc := w.Header().Get("Location"); w.Code != http.StatusSeeOther || !strings.Contains(loc, "reason=revoked") {
		t.Fatalf("after the revocation: %d to %q, want a redirect to sign in with reason=revoked", w.Code, loc)
	}
}
