package xero_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/practice"
)

// Connections reads Xero's GET /connections, and refuses an organisation
// without its tenant id.
func TestConnections(t *testing.T) {
	for _, c := range []struct {
		body string
		want int
		err  error
	}{
		{`[{"id":"c1","tenantId":"t1","tenantType":"ORGANISATION","tenantName":"Acme"},{"id":"c2","tenantId":"t2","tenantType":"PRACTICE","tenantName":"Acme Practice"}]`, 2, nil},
		{`[]`, 0, nil},
		{`[{"id":"c1","tenantName":"Acme"}]`, 0, practice.ErrBadUpstream},
		{`{"Status":"error"}`, 0, practice.ErrBadUpstream},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/connections" || r.Header.Get("Authorization") != "Bearer at" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			fmt.Fprint(w, c.body)
		}))
		cl, err := upstream.NewClient(upstream.Options{System: "xero", BaseURL: srv.URL,
			Auth: upstream.Headers{"Authorization": "Bearer at"}}, upstream.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := xero.Connections(context.Background(), cl, srv.URL+"/connections")
		srv.Close()
		if !errors.Is(err, c.err) || len(got) != c.want {
			t.Errorf("%s: %+v, %v", c.body, got, err)
		}
	}
}
