package api

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// servedDocument is the document as a gateway serves it, with a route
// marked deprecated as a Caddyfile may.
func servedDocument(t *testing.T) []byte {
	t.Helper()
	notices, err := deprecationNotices([]Deprecation{{Method: "POST", Path: "/v1/jobs/{id}/stage"}})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openAPIDocument(notices)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// oas31Schemas are the OpenAPI Initiative's published schemas, stored in
// testdata/oas-3.1 (see its README for their addresses).
var oas31Schemas = map[string]string{
	"https://spec.openapis.org/oas/3.1/schema/2025-09-15":      "schema-2025-09-15.json",
	"https://spec.openapis.org/oas/3.1/schema-base/2025-09-15": "schema-base-2025-09-15.json",
	"https://spec.openapis.org/oas/3.1/dialect/2024-11-10":     "dialect-2024-11-10.json",
	"https://spec.openapis.org/oas/3.1/meta/2024-11-10":        "meta-2024-11-10.json",
}

// TestOpenAPIDocumentIsValidOpenAPI31 validates the document against the
// official OpenAPI 3.1 schema, Schema Objects included (schema-base).
func TestOpenAPIDocumentIsValidOpenAPI31(t *testing.T) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	for url, file := range oas31Schemas {
		b, err := os.ReadFile(filepath.Join("testdata", "oas-3.1", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource(url, decodeJSON(t, b)); err != nil {
			t.Fatal(err)
		}
	}
	oas, err := c.Compile("https://spec.openapis.org/oas/3.1/schema-base/2025-09-15")
	if err != nil {
		t.Fatal(err)
	}
	if err := oas.Validate(decodeJSON(t, servedDocument(t))); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3.1:\n%v", err)
	}
}
