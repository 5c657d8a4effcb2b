package vendortest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func send(t *testing.T, method, url string, header map[string]string, body string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// requireDescription is the description a test checks against: without
// any descriptions at hand the test is skipped, saying how to run it;
// a description that cannot be read where they are fails it.
func requireDescription(t *testing.T, file string) *published {
	t.Helper()
	p, err := loadPublished(file)
	if errors.Is(err, errNoDescriptions) {
		t.Skip(uncheckedLine(err))
	}
	if err != nil {
		t.Fatalf("load %s: %v", file, err)
	}
	return p
}

func TestKarbonRequestsAreCheckedAgainstThePublishedDescription(t *testing.T) {
	requireDescription(t, karbonDescription)
	k := NewKarbon()
	defer k.Close()
	for i := range 250 {
		k.AddWorkItem(KarbonWorkItem{WorkItemKey: fmt.Sprintf("W%04d", i), Title: "t", StartDate: "2026-03-02T00:00:00Z"})
	}
	auth := map[string]string{"Authorization": "Bearer " + k.Bearer, "AccessKey": k.AccessKey}
	cases := []struct {
		name, method, path, body string
		want                     string // a part of the violation; "" for none
	}{
		{"a list page", "GET", "/v3/WorkItems?$top=100&$filter=ClientKey%20eq%20'C1'", "", ""},
		{"one expansion", "GET", "/v3/Contacts/C1?$expand=BusinessCards", "", ""},
		{"a list of expansions where one is published", "GET", "/v3/Contacts/C1?$expand=BusinessCards,ClientTeam", "", `"$expand"`},
		{"an expansion list where the schema is free text", "GET", "/v3/Organizations/O1?$expand=BusinessCards,ClientTeam,Contacts", "", ""},
		{"a $skip past the published maximum", "GET", "/v3/WorkItems?$top=100&$skip=200", "", `"$skip"`},
		{"a $top that is no number", "GET", "/v3/WorkItems?$top=all", "", `"$top"`},
		{"an undeclared parameter", "GET", "/v3/WorkItems/W0001?$select=Title", "", `"$select" is not declared`},
		{"an unpublished operation", "DELETE", "/v3/WorkItems/W0001", "", "is no operation"},
		{"an unpublished path", "GET", "/v3/Jobs", "", "is no operation"},
		{"a complete work item", "POST", "/v3/WorkItems",
			`{"Title":"VAT","AssigneeEmailAddress":"pat@firm.example","ClientKey":"C1","ClientType":"Contact","StartDate":"2026-03-02T00:00:00Z"}`, ""},
		{"a work item without its required fields", "POST", "/v3/WorkItems", `{"Title":"VAT"}`, "AssigneeEmailAddress"},
		{"a work item of an unpublished client type", "POST", "/v3/WorkItems",
			`{"Title":"VAT","AssigneeEmailAddress":"pat@firm.example","ClientKey":"C1","ClientType":"Person","StartDate":"2026-03-02T00:00:00Z"}`, "ClientType"},
	}
	for _, c := range cases {
		before := len(k.Violations())
		send(t, c.method, k.URL+c.path, auth, c.body)
		got := k.Violations()[before:]
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s: %s %s refused: %v", c.name, c.method, c.path, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
			t.Errorf("%s: %s %s: violations %v, want one naming %s", c.name, c.method, c.path, got, c.want)
		}
	}
}

// A next link Karbon hands out is followed as given: its parameters are
// the vendor's, even where its own description bounds them more tightly
// ($skip at most 100), while the same page asked for by a client is not.
func TestKarbonNextLinksAreTheVendors(t *testing.T) {
	requireDescription(t, karbonDescription)
	k := NewKarbon()
	defer k.Close()
	for i := range 250 {
		k.AddWorkItem(KarbonWorkItem{WorkItemKey: fmt.Sprintf("W%04d", i), Title: "t", StartDate: "2026-03-02T00:00:00Z"})
	}
	link, pages := k.URL+"/v3/WorkItems?$top=100&$filter=StartDate%20ge%202026-01-01T00:00:00Z", 0
	for ; link != ""; pages++ {
		req, _ := http.NewRequest("GET", link, nil)
		req.Header.Set("Authorization", "Bearer "+k.Bearer)
		req.Header.Set("AccessKey", k.AccessKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Next string `json:"@odata.nextLink"`
		}
		json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		link = page.Next
	}
	if v := k.Violations(); pages != 3 || len(v) > 0 {
		t.Fatalf("following Karbon's own next links over %d pages: %v", pages, v)
	}
	send(t, "GET", k.URL+"/v3/WorkItems?$top=100&$skip=200&$filter=StartDate%20ge%202026-01-01T00:00:00Z",
		map[string]string{"Authorization": "Bearer " + k.Bearer, "AccessKey": k.AccessKey}, "")
	if v := k.Violations(); len(v) != 1 || !strings.Contains(v[0], `"$skip"`) {
		t.Fatalf("a $skip of 200 the client built: %v", v)
	}
}

func TestXeroRequestsAreCheckedAgainstThePublishedDescription(t *testing.T) {
	requireDescription(t, xeroDescription)
	x := NewXero()
	defer x.Close()
	auth := map[string]string{"Authorization": "Bearer " + x.Token, "xero-tenant-id": x.TenantID}
	cases := []struct {
		name, path string
		header     map[string]string
		want       string
	}{
		{"a page", `/Invoices?page=2&pageSize=100&where=Type%3D%3D%22ACCREC%22&order=InvoiceID%20ASC`, auth, ""},
		{"modified since", "/Invoices?page=1", map[string]string{"Authorization": "Bearer " + x.Token, "xero-tenant-id": x.TenantID,
			"If-Modified-Since": "2026-03-02T09:00:00Z"}, ""},
		{"one invoice", "/Invoices/00000000-0000-0000-0000-000000000001", auth, ""},
		{"no organisation", "/Invoices?page=1", map[string]string{"Authorization": "Bearer " + x.Token}, `"xero-tenant-id"`},
		{"a page that is no number", "/Invoices?page=last", auth, `"page"`},
		{"an undeclared parameter", "/Invoices?limit=5", auth, `"limit" is not declared`},
		{"a page of quotes", "/Quotes?page=2&order=QuoteID%20ASC", auth, ""},
		{"quotes modified since", "/Quotes?page=1&order=QuoteID%20ASC", map[string]string{"Authorization": "Bearer " + x.Token,
			"xero-tenant-id": x.TenantID, "If-Modified-Since": "2026-03-02T09:00:00Z"}, ""},
		{"one quote", "/Quotes/00000000-0000-0000-0000-000000000001", auth, ""},
		{"a quote page size Xero does not take", "/Quotes?page=1&pageSize=100", auth, `"pageSize" is not declared`},
	}
	for _, c := range cases {
		before := len(x.Violations())
		send(t, "GET", x.URL+c.path, c.header, "")
		got := x.Violations()[before:]
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s: %s refused: %v", c.name, c.path, got)
		case c.want != "" && (len(got) != 1 || !strings.Contains(got[0], c.want)):
			t.Errorf("%s: %s: violations %v, want one naming %s", c.name, c.path, got, c.want)
		}
	}
}

// The webhooks the doubles build are the ones the vendors publish.
func TestWebhookBodiesArePublished(t *testing.T) {
	karbon := requireDescription(t, karbonDescription)
	xero := requireDescription(t, xeroWebhooksDescription)
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct{ hook, typ, action string }{
		{"work", "Work", "Updated"}, {"work", "Work", "Inserted"}, {"contact", "Contact", "Updated"},
		{"contact", "Contact", "Deleted"}, {"user", "User", "Inserted"},
	} {
		if err := karbon.checkWebhook(c.hook, KarbonWebhook(c.typ, "K1", c.action, at)); err != nil {
			t.Errorf("Karbon %s webhook: %v", c.hook, err)
		}
	}
	// Organizations and client groups arrive as ResourceType Contact.
	if err := karbon.checkWebhook("contact", KarbonWebhook("Organization", "K1", "Updated", at)); err == nil {
		t.Error("a Karbon webhook with an unpublished ResourceType passed")
	}
	for _, body := range [][]byte{
		XeroWebhook("aef86862-2015-4b6b-88bc-d89032cecc50", at, "00000000-0000-0000-0000-000000000001"),
		XeroWebhook("aef86862-2015-4b6b-88bc-d89032cecc50", at), // intent to receive
	} {
		if err := xero.checkWebhook("invoices", body); err != nil {
			t.Errorf("Xero invoice webhook %s: %v", body, err)
		}
	}
	bad := strings.Replace(string(XeroWebhook("aef86862-2015-4b6b-88bc-d89032cecc50", at, "00000000-0000-0000-0000-000000000001")),
		`"UPDATE"`, `"CHANGE"`, 1)
	if err := xero.checkWebhook("invoices", []byte(bad)); err == nil {
		t.Error("a Xero webhook with an unpublished eventType passed")
	}
}

// The descriptions load as published but for the repairs listed here:
// Karbon's marks four properties `"required": true`, which is not JSON
// Schema; they are dropped rather than guessed at. A new version of a
// description with other defects fails here first.
func TestDescriptionsLoad(t *testing.T) {
	want := map[string][]string{
		karbonDescription: {
			`#/components/schemas/BusinessCardRequest/properties/BusinessCardKey: dropped "required": true`,
			`#/components/schemas/CustomFieldDefinitions/properties/value/items/allOf/0/properties/Key: dropped "required": true`,
			`#/paths/~1v3~1WebhookSubscriptions/post/requestBody/content/application~1json/schema/properties/TargetUrl: dropped "required": true`,
			`#/paths/~1v3~1WebhookSubscriptions/post/requestBody/content/application~1json/schema/properties/WebhookType: dropped "required": true`,
		},
		xeroDescription:         nil,
		xeroWebhooksDescription: nil,
		xpmDescription:          nil,
	}
	for file, repairs := range want {
		p := requireDescription(t, file)
		if !slices.Equal(p.repairs, repairs) {
			t.Errorf("%s repaired %q, want %q", file, p.repairs, repairs)
		}
	}
}

// tb records what Conforms reports instead of failing the test.
type tb struct {
	testing.TB
	errors   []string
	cleanups []func()
}

func (r *tb) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *tb) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// A test that makes an adapter send what the vendor does not publish fails
// when it ends, naming the request and why.
func TestConformsFailsTheTestThatSentIt(t *testing.T) {
	requireDescription(t, karbonDescription)
	k := NewKarbon()
	defer k.Close()
	r := &tb{TB: t}
	k.Conforms(r)
	send(t, "GET", k.URL+"/v3/Contacts/C1?$expand=BusinessCards,ClientTeam",
		map[string]string{"Authorization": "Bearer " + k.Bearer, "AccessKey": k.AccessKey}, "")
	for _, f := range r.cleanups {
		f()
	}
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "GET /v3/Contacts/C1?$expand=BusinessCards,ClientTeam") ||
		!strings.Contains(r.errors[0], "karbon-api-v3.openapi.json") {
		t.Fatalf("reported %q", r.errors)
	}
}

// A clone with nothing beside it has no descriptions: that is said, not
// failed, and the doubles serve; a folder PRACTICEGW_VENDOR_APIS names is
// where they must be.
func TestWithoutDescriptionsRequestsGoUnchecked(t *testing.T) {
	clone := filepath.Join(t.TempDir(), "practicegw")
	if err := os.MkdirAll(filepath.Join(clone, "adapters"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "go.mod"), []byte("module example.com/clone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(clone, "adapters"))
	t.Setenv(vendorAPIsEnv, "")
	_, err := vendorAPIsDir()
	if !errors.Is(err, errNoDescriptions) {
		t.Fatalf("no descriptions beside the clone: %v, want errNoDescriptions", err)
	}
	if line := uncheckedLine(err); !strings.Contains(line, vendorAPIsEnv) || strings.Contains(line, "\n") {
		t.Errorf("the line does not say in one line how to check requests: %q", line)
	}

	c := &conformance{loadErr: err, links: map[string]bool{}}
	r := &tb{TB: t}
	c.Conforms(r)
	srv := httptest.NewServer(c.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
	defer srv.Close()
	send(t, "GET", srv.URL+"/v3/NotPublished", nil, "")
	for _, f := range r.cleanups {
		f()
	}
	if len(r.errors) > 0 {
		t.Errorf("requests failed the test without descriptions to check them against: %v", r.errors)
	}

	// Named, the folder must hold them: a missing one is not "unchecked".
	named := filepath.Join(t.TempDir(), "vendor-apis")
	t.Setenv(vendorAPIsEnv, named)
	dir, err := vendorAPIsDir()
	if err != nil || dir != named {
		t.Fatalf("named folder: %q, %v", dir, err)
	}
	if _, err := readPublished(filepath.Join(dir, karbonDescription)); err == nil || errors.Is(err, errNoDescriptions) {
		t.Errorf("a description missing from the named folder: %v, want an error that fails the test", err)
	}
}
