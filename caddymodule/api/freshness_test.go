package api

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/practicegw/practicegw/practice"
)

// freshReader is a copy whose freshness a test sets.
type freshReader struct{ f practice.Freshness }

func (r freshReader) List(context.Context, practice.Tenant, practice.Kind, practice.Query) (practice.Page, error) {
	return practice.Page{}, nil
}

func (r freshReader) Get(context.Context, practice.Tenant, practice.Kind, string) (json.RawMessage, error) {
	return nil, nil
}

func (r freshReader) Freshness(practice.Kind) (practice.Freshness, bool) { return r.f, true }

// A failing copy says why in Data-State-Reason, in printable ASCII of at
// most 200 characters; any other state says no reason.
func TestFailingReadsSayWhy(t *testing.T) {
	for _, tc := range []struct {
		f    practice.Freshness
		want string
	}{
		{practice.Freshness{State: "failing", Reason: "Karbon refused the access key; reconnect with a new one"},
			"Karbon refused the access key; reconnect with a new one"},
		{practice.Freshness{State: "failing", Reason: "the new consent does not reach Müller\r\nSet-Cookie: x"},
			"the new consent does not reach M?ller??Set-Cookie: x"},
		{practice.Freshness{State: "failing", Reason: strings.Repeat("a", 300)}, strings.Repeat("a", 200)},
		{practice.Freshness{State: "failing"}, ""},
		{practice.Freshness{State: "live", Reason: "stale words"}, ""},
	} {
		w := httptest.NewRecorder()
		writeFreshness(w, freshReader{tc.f}, practice.Invoices)
		if got := w.Header().Get("Data-State-Reason"); got != tc.want || w.Header().Get("Data-State") != tc.f.State {
			t.Errorf("%+v: Data-State %q, Data-State-Reason %q; want %q", tc.f, w.Header().Get("Data-State"), got, tc.want)
		}
	}
}
