package sharepoint_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/sharepoint"
	"github.com/practicegw/practicegw/practice"
)

func siteClient(t *testing.T, h http.HandlerFunc) *upstream.Client {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := upstream.NewClient(upstream.Options{System: "graph", BaseURL: srv.URL + "/v1.0"}, upstream.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Sites follows Graph's next links to the last page.
func TestSitesFollowsNextLinks(t *testing.T) {
	var c *upstream.Client
	c = siteClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1.0/sites" || r.URL.Query().Get("search") != "*" {
			t.Errorf("query %s", r.URL.RawQuery)
		}
		if r.URL.Query().Get("$skiptoken") == "" {
			fmt.Fprintf(w, `{"value":[{"id":"s1","displayName":"Clients"}],"@odata.nextLink":"%s/sites?search=*&$skiptoken=2"}`, c.BaseURL())
			return
		}
		fmt.Fprint(w, `{"value":[{"id":"s2","name":"tax"}]}`)
	})
	sites, err := sharepoint.Sites(context.Background(), c)
	if err != nil || len(sites) != 2 || sites[0].DisplayName != "Clients" || sites[1].ID != "s2" {
		t.Fatalf("%+v, %v", sites, err)
	}
}

// A site without an id, a next link elsewhere or one that never ends is
// an answer the gateway cannot use.
func TestSitesRefusesUnusableAnswers(t *testing.T) {
	for name, body := range map[string]string{
		"no id":            `{"value":[{"displayName":"x"}]}`,
		"link elsewhere":   `{"value":[],"@odata.nextLink":"https://evil.example/v1.0/sites"}`,
		"endless":          `{"value":[],"@odata.nextLink":"/v1.0/sites?search=*&$skiptoken=again"}`,
		"not graph's json": `<html/>`,
	} {
		t.Run(name, func(t *testing.T) {
			c := siteClient(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) })
			if _, err := sharepoint.Sites(context.Background(), c); !errors.Is(err, practice.ErrBadUpstream) {
				t.Fatalf("%v; want a bad upstream answer", err)
			}
		})
	}
}
