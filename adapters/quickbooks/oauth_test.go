package quickbooks_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/vendortest"
)

func challenge(verifier string) string { return oauth2.S256ChallengeFromVerifier(verifier) }

// exchange trades an authorization code for the grant's refresh token.
func exchange(t *testing.T, q *vendortest.QuickBooks, code, verifier, redirect string) string {
	t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
	req, _ := http.NewRequest(http.MethodPost, q.Identity.TokenURL(), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(q.Identity.ClientID, q.Identity.ClientSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		RefreshToken string `json:"refresh_token"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&tok) != nil || tok.RefreshToken == "" {
		t.Fatalf("exchange: %s", resp.Status)
	}
	return tok.RefreshToken
}
