package vendortest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

func qboSchemaOrSkip(t *testing.T) *xsdSchema {
	t.Helper()
	s, err := qboSchema()
	if err != nil {
		t.Skip(uncheckedLine(err))
	}
	return s
}

// The schema check refuses what Intuit's schemas do not allow and takes
// what the double serves.
func TestQuickBooksSchemaCheck(t *testing.T) {
	s := qboSchemaOrSkip(t)
	bad := map[string]string{
		`{"Invoice":{"Id":"1","Total":5}}`:                                                           `declares no element or attribute "Total"`,
		`{"Invoice":{"Id":"1","TotalAmt":"5.00"}}`:                                                   `TotalAmt: xs:decimal is a number`,
		`{"Invoice":{"Id":"1","TxnDate":"02/03/2026"}}`:                                              `not an xs:date`,
		`{"Invoice":{"Id":"1","status":"Gone"}}`:                                                     `not one of EntityStatusEnum's values`,
		`{"Invoice":{"Id":"1","CustomerRef":[{"value":"1"}]}}`:                                       `occurs once, got an array`,
		`{"Invoice":{"Id":"1","MetaData":{"LastUpdated":"x"}}}`:                                      `declares no element or attribute "LastUpdated"`,
		`{"Invoices":{"Id":"1"}}`:                                                                    `declares no element or attribute "Invoices"`,
		`{"QueryResponse":{"Invoice":[],"startPosition":"1"}}`:                                       `whole number`,
		`{"CDCResponse":[{"QueryResponse":[{"Payment":[{"Line":[{"LinkedTxn":[{"TxnId":1}]}]}]}]}]}`: `TxnId`,
	}
	for doc, want := range bad {
		problems := s.checkJSON("IntuitResponse", []byte(doc))
		if !strings.Contains(strings.Join(problems, "; "), want) {
			t.Errorf("%s: %q, want one saying %q", doc, problems, want)
		}
	}
	q := StartQuickBooks(t)
	q.AddInvoice(QBInvoice{ID: "1", DocNumber: "1001", CustomerID: "7", CustomerName: "Birch", TxnDate: time.Now(),
		DueDate: time.Now(), Total: "10.00", Updated: time.Now()})
	q.Pay("1", "Visa", "", time.Now())
	q.Delete("1", time.Now())
	for _, path := range []string{"/query?query=" + url.QueryEscape("select * from Payment STARTPOSITION 1 MAXRESULTS 10"),
		"/query?query=" + url.QueryEscape("select * from Customer"),
		"/cdc?entities=Invoice,Payment&changedSince=" + url.QueryEscape(time.Now().Add(-time.Hour).Format(time.RFC3339))} {
		get(t, q, path, http.StatusOK)
	}
	if v := q.Violations(); len(v) != 0 {
		t.Errorf("the double's own answers: %q", v)
	}
}

// Requests are checked against the schemas too: an entity that is none,
// a filter on an element the entity lacks, a value of the wrong type.
func TestQuickBooksRequestCheck(t *testing.T) {
	s := qboSchemaOrSkip(t)
	c := qboRequests{s}
	cases := map[string]string{
		"/v3/company/1/query?query=" + url.QueryEscape("select * from Invoices"):                                                 "no IntuitObject",
		"/v3/company/1/query?query=" + url.QueryEscape("select * from Invoice where MetaData.Updated >= '2026-01-01T00:00:00Z'"): "has no element",
		"/v3/company/1/query?query=" + url.QueryEscape("select * from Invoice where MetaData.LastUpdatedTime >= 'yesterday'"):    "xs:dateTime",
		"/v3/company/1/cdc?entities=Invoice,Bills&changedSince=2026-01-01T00:00:00Z":                                             `"Bills" is no IntuitObject`,
		"/v3/company/1/cdc?entities=Invoice&changedSince=yesterday":                                                              "changedSince",
		"/v3/company/1/invoice/1?minorversion=75&expand=all":                                                                     `"expand"`,
		"/v3/company/1/invoices/1": "no IntuitObject",
	}
	for target, want := range cases {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		err := c.check(r, nil, false)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want one saying %q", target, err, want)
		}
	}
	ok := "/v3/company/1/query?minorversion=75&query=" + url.QueryEscape("select * from Invoice where MetaData.LastUpdatedTime >= '2026-01-01T00:00:00Z' STARTPOSITION 1 MAXRESULTS 1000")
	if err := c.check(httptest.NewRequest(http.MethodGet, ok, nil), nil, false); err != nil {
		t.Errorf("a published query: %v", err)
	}
}

// Intuit's identity service: the callback names the company, the grant
// reaches it alone, revocation takes the token as JSON.
func TestQuickBooksIdentity(t *testing.T) {
	q := StartQuickBooks(t)
	redirect := "https://gw.example/cb"
	q.Identity.AllowRedirect(redirect)
	verifier := strings.Repeat("v", 43)
	u := q.Identity.AuthorizeURL() + "?" + url.Values{"response_type": {"code"}, "client_id": {q.Identity.ClientID},
		"redirect_uri": {redirect}, "state": {"s"}, "scope": {"com.intuit.quickbooks.accounting"},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}}.Encode()
	back, err := q.Identity.Allow(u)
	if err != nil {
		t.Fatal(err)
	}
	if back.Query().Get("realmId") != q.RealmID {
		t.Fatalf("callback %s", back)
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
	req, _ := http.NewRequest(http.MethodPost, q.Identity.TokenURL(), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(q.Identity.ClientID, q.Identity.ClientSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("exchange: %v %v", resp, err)
	}
	resp.Body.Close()
	g := q.Identity.Grants()
	if len(g) != 1 || len(g[0].Tenants) != 1 || g[0].Tenants[0] != q.RealmID {
		t.Fatalf("grant %+v", g)
	}
	rev, _ := http.NewRequest(http.MethodPost, q.Identity.RevokeURL(), bytes.NewReader([]byte(`{"token":"`+g[0].RefreshToken+`"}`)))
	rev.Header.Set("Content-Type", "application/json")
	rev.SetBasicAuth(q.Identity.ClientID, q.Identity.ClientSecret)
	resp, err = http.DefaultClient.Do(rev)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %v %v", resp, err)
	}
	resp.Body.Close()
	if !q.Identity.Revoked(g[0].RefreshToken) {
		t.Error("the grant was not revoked")
	}
}

func get(t *testing.T, q *QuickBooks, path string, status int) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, q.URL+"/v3/company/"+q.RealmID+path, nil)
	req.Header.Set("Authorization", "Bearer "+q.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != status {
		t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, status)
	}
}

// Estimates as the double serves them, in every state and deleted, by
// read, query and change data capture, are Intuit's Estimate; a
// TxnStatus outside QboEstimateStatusEnum (a string in the schema, whose
// documentation names the enumeration) is a violation.
func TestQuickBooksEstimatesConform(t *testing.T) {
	s := qboSchemaOrSkip(t)
	for doc, want := range map[string]string{
		`{"Estimate":{"Id":"1","AcceptedDate":"2026-02-03T10:00:00Z"}}`: `not an xs:date`,
		`{"Estimate":{"Id":"1","Accepted":true}}`:                       `declares no element or attribute "Accepted"`,
		`{"Estimate":{"Id":"1","EmailStatus":"Sent"}}`:                  `not one of EmailStatusEnum's values`,
	} {
		problems := s.checkJSON("IntuitResponse", []byte(doc))
		if !strings.Contains(strings.Join(problems, "; "), want) {
			t.Errorf("%s: %q, want one saying %q", doc, problems, want)
		}
	}
	q := StartQuickBooks(t)
	now := time.Now()
	for i, st := range []string{"Pending", "Accepted", "Closed", "Rejected"} {
		q.AddEstimate(QBEstimate{ID: string(rune('1' + i)), DocNumber: "100" + string(rune('1'+i)), CustomerID: "7", CustomerName: "Birch",
			TxnDate: now, Lines: []string{"Year-end accounts", "Tax return"}, Total: "1200.00", Status: st, Updated: now})
	}
	q.SetEstimateStatus("1", "Accepted", now)
	inv := q.InvoiceEstimate("1", now)
	q.DeleteEstimate("4", now)
	for _, path := range []string{"/query?query=" + url.QueryEscape("select * from Estimate STARTPOSITION 1 MAXRESULTS 1000"),
		"/estimate/1", "/invoice/" + inv,
		"/cdc?entities=Invoice,Estimate,Payment&changedSince=" + url.QueryEscape(now.Add(-time.Hour).Format(time.RFC3339))} {
		get(t, q, path, http.StatusOK)
	}
	get(t, q, "/estimate/4", http.StatusBadRequest)
	if v := q.Violations(); len(v) != 0 {
		t.Errorf("the double's own answers: %q", v)
	}
	other := NewQuickBooks()
	defer other.Close()
	other.AddEstimate(QBEstimate{ID: "1", CustomerID: "7", Total: "1", Status: "Converted", Updated: now})
	get(t, other, "/estimate/1", http.StatusOK)
	if v := other.Violations(); len(v) != 1 || !strings.Contains(v[0], "QboEstimateStatusEnum") {
		t.Errorf("a status Intuit does not publish: %q", v)
	}
}
