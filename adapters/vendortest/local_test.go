package vendortest

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// ServeLocal serves every double on its port from the first one up, with
// data, through fronts whose URLs are the ones the doubles write.
func TestServeLocal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	first := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	l, err := ServeLocal("127.0.0.1", first, "http://localhost:8080")
	if err != nil {
		t.Skipf("ports from %d are not all free: %v", first, err)
	}
	defer l.Close()
	if len(l.Served) != 6 {
		t.Fatalf("serves %d doubles, want 6", len(l.Served))
	}
	for i, s := range l.Served {
		if s.URL != "http://127.0.0.1:"+strconv.Itoa(first+i) {
			t.Errorf("%s at %s", s.Name, s.URL)
		}
	}
	req, _ := http.NewRequest("GET", l.Served[0].URL+"/v3/Contacts", nil)
	req.Header.Set("Authorization", "Bearer bearer-token")
	req.Header.Set("AccessKey", "access-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Value []map[string]any `json:"value"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || len(page.Value) == 0 {
		t.Fatalf("Karbon's contacts: %d %v %v", resp.StatusCode, err, page)
	}
	resp.Body.Close()
	// Xero's consent page, for the gateway's callback.
	consent := l.Served[1].URL + "/identity/connect/authorize?response_type=code&client_id=xero-client&redirect_uri=" +
		"http%3A%2F%2F127.0.0.1%3A8080%2Fconnect%2Fcallback&scope=openid+accounting.transactions.read&state=s1&code_challenge=" +
		strings.Repeat("a", 43) + "&code_challenge_method=S256"
	resp, err = http.Get(consent)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `id="allow"`) {
		t.Fatalf("Xero's consent page: %d %s", resp.StatusCode, body)
	}
}
