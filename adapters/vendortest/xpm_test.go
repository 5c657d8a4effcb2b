package vendortest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestXPMRequestsAreCheckedAgainstThePublishedDescription(t *testing.T) {
	requireDescription(t, xpmDescription)
	x := NewXPM()
	defer x.Close()
	auth := map[string]string{"Authorization": "Bearer " + x.Token, "xero-tenant-id": x.TenantID}
	cases := []struct {
		name, method, path, body string
		want                     string // a part of the violation; "" for none
	}{
		{"every client", "GET", "/v3.1/client.api/list", "", ""},
		{"clients modified since", "GET", "/v3.1/client.api/list?modifiedSince=2026-03-02T09:00:00", "", ""},
		{"a page of clients", "GET", "/v3.1/client.api/paged-list?pageSize=100&pageToken=YWZ0ZXI6MTAw", "", ""},
		{"a page size that is no number", "GET", "/v3.1/client.api/paged-list?pageSize=all", "", `"pageSize"`},
		{"jobs by creation date", "GET", "/v3.1/job.api/list?from=20250303&to=20260302", "", ""},
		{"jobs without their required range", "GET", "/v3.1/job.api/list", "", `"from"`},
		{"an undeclared parameter", "GET", "/v3.1/job.api/current?modifiedSince=2026-03-02T09:00:00", "", `"modifiedSince" is not declared`},
		{"an unpublished operation", "DELETE", "/v3.1/job.api/get/J000001", "", "is no operation"},
		{"a job state", "PUT", "/v3.1/job.api/state", `{"id":"J000001","state":"Planned"}`, ""},
		{"a job state with a member XPM does not publish", "PUT", "/v3.1/job.api/state", `{"id":"J000001","stage":"planned"}`, "stage"},
		{"a client with contacts", "POST", "/v3.1/client.api/add",
			`{"name":"Acme Ltd","isProspect":"No","contacts":[{"name":"Ann","position":"Director","isPrimary":"Yes"}]}`, ""},
		{"current quotes in detail", "GET", "/v3.1/quote.api/current?detailed=true", "", ""},
		{"quotes by date in detail", "GET", "/v3.1/quote.api/list?from=20250303&to=20260302&detailed=true", "", ""},
		{"quotes without their required range", "GET", "/v3.1/quote.api/list?detailed=true", "", `"from"`},
		{"a quote", "GET", "/v3.1/quote.api/get/Q000001", "", ""},
		{"quotes modified since", "GET", "/v3.1/quote.api/draft?modifiedSince=2026-03-02T09:00:00", "", `"modifiedSince" is not declared`},
		{"a quote from a job", "POST", "/v3.1/job.api/createquote/J000001", "", ""},
		{"a contact flag that is no string", "POST", "/v3.1/client.api/add", `{"name":"Acme Ltd","contacts":[{"name":"Ann","isPrimary":true}]}`, "isPrimary"},
	}
	for _, c := range cases {
		before := len(x.Violations())
		send(t, c.method, x.URL+c.path, auth, c.body)
		got := x.Violations()[before:]
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s: %s %s refused: %v", c.name, c.method, c.path, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
			t.Errorf("%s: %s %s: violations %v, want one naming %s", c.name, c.method, c.path, got, c.want)
		}
	}
}

// A token of a consent is held to its scopes, as XPM's description gives
// them for each operation: any one of them admits it.
func TestXPMHoldsATokenToItsScopes(t *testing.T) {
	requireDescription(t, xpmDescription)
	x := NewXPM()
	defer x.Close()
	reader, _ := x.Identity.Consent("offline_access practicemanager.read")
	clients, _ := x.Identity.Consent("practicemanager.client.read")
	for _, c := range []struct {
		name, token, method, path, body string
		want                            string
	}{
		{"read with practicemanager.read", reader, "GET", "/v3.1/invoice.api/current", "", ""},
		{"a client with practicemanager.client.read", clients, "GET", "/v3.1/client.api/list", "", ""},
		{"a client written with practicemanager.read", reader, "POST", "/v3.1/client.api/add", `{"name":"Acme Ltd"}`,
			"holds none of the scopes POST /v3.1/client.api/add takes: practicemanager, practicemanager.client"},
		{"invoices with practicemanager.client.read", clients, "GET", "/v3.1/invoice.api/current", "", "practicemanager.read"},
		{"the double's own token, of no consent", x.Token, "POST", "/v3.1/client.api/add", `{"name":"Acme Ltd"}`, ""},
	} {
		before := len(x.Violations())
		send(t, c.method, x.URL+c.path, map[string]string{"Authorization": "Bearer " + c.token, "xero-tenant-id": x.TenantID}, c.body)
		got := x.Violations()[before:]
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s: refused: %v", c.name, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
			t.Errorf("%s: violations %v, want one saying %s", c.name, got, c.want)
		}
	}
}

// client.api/paged-list pages with XPM's own pageToken, handed out in
// pagination.links.next, and leaves archived and deleted clients out.
func TestXPMPagedListFollowsPageTokens(t *testing.T) {
	x := StartXPM(t)
	for i := range 230 {
		x.AddClient(XPMClient{UUID: fmt.Sprintf("c0ffee00-0000-4000-8000-%012d", i), Name: fmt.Sprintf("Client %d", i),
			Archived: i%10 == 9, Modified: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)})
	}
	ids := xpmPagedClients(t, x, 50)
	if len(ids) != 207 {
		t.Fatalf("paged-list gave %d clients, want the 207 not archived", len(ids))
	}
	if n := len(x.Requests()); n != 5 {
		t.Fatalf("%d requests for 207 clients at 50 a page, want 5", n)
	}
}
