package recordscan

import (
	"slices"
	"strings"
	"testing"
)

const doc = `{"components":{"schemas":{
  "ClientRecord":{"properties":{"object":{"type":"string","const":"client"},"name":{"type":"string"},
    "owner":{"type":["string","null"]},"created_at":{"type":["string","null"],"format":"date-time"}}},
  "Job":{"properties":{"object":{"type":"string","const":"job"},"owner":{"type":["string","null"]},
    "client":{"oneOf":[{"$ref":"#/components/schemas/X"},{"type":"null"}]},"title":{"type":"string"}}},
  "Contact":{"properties":{"name":{"type":"string"}}}}}}`

func TestScan(t *testing.T) {
	nullable, err := FromOpenAPI([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if !nullable["client"]["owner"] || !nullable["job"]["client"] || nullable["client"]["name"] || len(nullable) != 2 {
		t.Fatalf("nullable fields %v", nullable)
	}
	for _, c := range []struct {
		name, body string
		want       []string // substrings, one a problem, in order
	}{
		{"clean", `{"object":"client","name":"Birch & Co <Holdings>","owner":null,"created_at":null}`, nil},
		{"an empty name is not nullable", `{"object":"client","name":"","owner":"usr_1"}`, nil},
		{"a literal backslash-u is text", `{"object":"client","name":"C:\\u003cdir"}`, nil},
		{"escaped", `{"object":"client","name":"Birch \u0026 Co \u003cHoldings\u003E"}`,
			[]string{`\u0026`, `\u003c`, `\u003E`}},
		{"zero time", `{"object":"client","created_at":"0001-01-01T00:00:00Z"}`, []string{"$.created_at: the zero time"}},
		{"empty nullable", `{"object":"list","data":[{"object":"job","owner":"","client":"","title":""}]}`,
			[]string{"$.data[0].client: empty", "$.data[0].owner: empty"}},
		{"in an event", `{"object":"event","data":{"object":{"object":"client","owner":""}}}`,
			[]string{"$.data.object.owner: empty"}},
		{"not JSON", `{"object":`, []string{"not JSON"}},
	} {
		got := Scan([]byte(c.body), nullable)
		if len(got) != len(c.want) || !slices.EqualFunc(got, c.want, strings.Contains) {
			t.Errorf("%s: problems %q, want %q", c.name, got, c.want)
		}
	}
	stream := "id: 1\ndata: {\"object\":\"client\",\"owner\":\"\"}\n\n: keep-alive\n\nid: 2\ndata: {\"object\":\"client\",\"owner\":null}\n\n"
	if got := ScanEventStream([]byte(stream), nullable); len(got) != 1 || !strings.HasPrefix(got[0], "line 2: $.owner") {
		t.Errorf("stream problems %q", got)
	}
}

func TestRepositoryDocumentDeclaresRecordsNullable(t *testing.T) {
	nullable := Repository(t)
	for object, field := range map[string]string{"client": "owner", "job": "owner", "person": "created_at"} {
		if !nullable[object][field] {
			t.Errorf("client/openapi.json: %s.%s is not nullable", object, field)
		}
	}
}
