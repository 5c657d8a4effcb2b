package vendortest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// getKarbon reads a Karbon list page, failing t on a transport error.
func getKarbon(t *testing.T, k *Karbon, link string) (status int, keys []string, next string) {
	t.Helper()
	req, _ := http.NewRequest("GET", link, nil)
	req.Header.Set("Authorization", "Bearer "+k.Bearer)
	req.Header.Set("AccessKey", k.AccessKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Value []map[string]any `json:"value"`
		Next  string           `json:"@odata.nextLink"`
	}
	json.NewDecoder(resp.Body).Decode(&page)
	for _, row := range page.Value {
		for _, f := range []string{"ContactKey", "OrganizationKey", "ClientGroupKey"} {
			if s, ok := row[f].(string); ok {
				keys = append(keys, s)
			}
		}
	}
	return resp.StatusCode, keys, page.Next
}

// $orderby is served as Karbon publishes it: on contacts and
// organizations by FullName or LastModifiedDateTime, either way, on client
// groups by FullName; rows that tie keep the default order by key, and
// the next link carries the order on. Anything else is refused.
func TestKarbonOrderBy(t *testing.T) {
	requireDescription(t, karbonDescription)
	k := NewKarbon()
	defer k.Close()
	epoch := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for i := range 150 {
		// Pairs share a time, in the zone a caller gave it.
		at := epoch.Add(time.Duration(i/2) * time.Hour).In(time.FixedZone("BST", 3600))
		k.AddContact(KarbonContact{ContactKey: fmt.Sprintf("C%03d", i), FirstName: "Ann", LastName: fmt.Sprintf("Z%03d", 149-i), LastModified: at})
	}
	k.AddClientGroup(KarbonClientGroup{ClientGroupKey: "G1", FullName: "Beta", LastModified: epoch})
	k.AddClientGroup(KarbonClientGroup{ClientGroupKey: "G2", FullName: "Alpha", LastModified: epoch.Add(time.Hour)})

	var got []string
	link := k.URL + "/v3/Contacts?$orderby=LastModifiedDateTime%20desc&$top=100"
	for link != "" {
		status, keys, next := getKarbon(t, k, link)
		if status != http.StatusOK {
			t.Fatalf("%s: %d", link, status)
		}
		if next != "" && !strings.Contains(next, "$orderby=LastModifiedDateTime%20desc") {
			t.Fatalf("next link %s drops the order", next)
		}
		got, link = append(got, keys...), next
	}
	if len(got) != 150 || got[0] != "C148" || got[1] != "C149" || got[2] != "C146" || got[149] != "C001" {
		t.Fatalf("newest first: %d rows, %v ... %v", len(got), got[:4], got[len(got)-2:])
	}
	if _, keys, _ := getKarbon(t, k, k.URL+"/v3/Contacts?$orderby=FullName&$top=3"); strings.Join(keys, ",") != "C149,C148,C147" {
		t.Fatalf("by name: %v", keys)
	}
	if _, keys, _ := getKarbon(t, k, k.URL+"/v3/ClientGroups?$orderby=FullName"); strings.Join(keys, ",") != "G2,G1" {
		t.Fatalf("groups by name: %v", keys)
	}
	if v := k.Violations(); len(v) > 0 {
		t.Fatalf("published orders refused: %v", v)
	}
	for _, link := range []string{"/v3/Contacts?$orderby=ContactKey", "/v3/ClientGroups?$orderby=LastModifiedDateTime%20desc",
		"/v3/Organizations?$orderby=FullName%20sideways"} {
		if status, _, _ := getKarbon(t, k, k.URL+link); status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", link, status)
		}
	}
	if v := k.Violations(); len(v) != 2 || !strings.Contains(v[0], `"$orderby"`) {
		t.Fatalf("orders the description does not list: violations %v", v)
	}
}
