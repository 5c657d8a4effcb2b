package api

import (
	"encoding/json"
	"slices"
	"sort"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/practicegw/practicegw/dispatcher"
)

// contractEvents is each event name the contract lists, with the data
// fields it names besides object and the record object is.
var contractEvents = map[string]struct {
	fields []string
	object string
}{
	"client.created":           {[]string{"client_id"}, "ClientRecord"},
	"client.updated":           {[]string{"client_id"}, "ClientRecord"},
	"engagement.created":       {[]string{"engagement_id"}, "Engagement"},
	"engagement.signed":        {[]string{"engagement_id", "client_id", "released_jobs"}, "Engagement"},
	"engagement_letter.signed": {[]string{"engagement_id", "client_id", "released_jobs"}, "Engagement"},
	"job.opened":               {[]string{"job_id"}, "Job"},
	"job.stage_changed":        {[]string{"job_id", "previous_stage", "stage", "note"}, "Job"},
	"job.closed":               {[]string{"job_id"}, "Job"},
	"document.filed":           {[]string{"document_id"}, "Document"},
	"invoice.raised":           {[]string{"invoice_id"}, "Invoice"},
	"invoice.paid":             {[]string{"invoice_id", "settled_via"}, "Invoice"},
	"client.deleted":           {[]string{"client_id"}, "Tombstone"},
	"job.deleted":              {[]string{"job_id"}, "Tombstone"},
	"document.deleted":         {[]string{"document_id"}, "Tombstone"},
	"invoice.deleted":          {[]string{"invoice_id"}, "Tombstone"},
	"person.deleted":           {[]string{"person_id"}, "Tombstone"},
}

type catalogDoc struct {
	Webhooks map[string]struct {
		Post struct {
			OperationID string `json:"operationId"`
			Summary     string
			Parameters  []struct {
				Name, In string
				Required bool
			}
			RequestBody struct {
				Required bool
				Content  map[string]struct {
					Schema  json.RawMessage
					Example json.RawMessage
				}
			} `json:"requestBody"`
		}
	}
	Components struct {
		Schemas    map[string]json.RawMessage
		Parameters map[string]struct {
			Name, In string
			Required bool
		}
	}
}

type objectSchema struct {
	Required   []string
	Properties map[string]struct {
		Ref   string `json:"$ref"`
		Const string
	}
	AdditionalProperties *bool `json:"additionalProperties"`
}

func schemaAt(t *testing.T, doc catalogDoc, ref string) objectSchema {
	t.Helper()
	const prefix = "#/components/schemas/"
	raw, ok := doc.Components.Schemas[ref[len(prefix):]]
	if !ok || ref[:len(prefix)] != prefix {
		t.Fatalf("no schema %s", ref)
	}
	var s objectSchema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEventCatalogFollowsTheContract reads the document's webhooks: every
// event name of the contract and no other, each with the envelope, the
// data fields the contract names, the full record as object, the signing
// headers, and an example that is valid against the kind's schema.
func TestEventCatalogFollowsTheContract(t *testing.T) {
	raw := servedDocument(t)
	var doc catalogDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var names, want []string
	for name := range doc.Webhooks {
		names = append(names, name)
	}
	for name := range contractEvents {
		want = append(want, name)
	}
	sort.Strings(names)
	sort.Strings(want)
	if !slices.Equal(names, want) {
		t.Fatalf("webhooks %v, want the contract's %v", names, want)
	}

	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("/v1/openapi.json", decodeJSON(t, raw)); err != nil {
		t.Fatal(err)
	}
	for name, spec := range contractEvents {
		op := doc.Webhooks[name].Post
		if op.Summary == "" || op.OperationID == "" || !op.RequestBody.Required {
			t.Errorf("%s: summary %q, operationId %q, body required %v", name, op.Summary, op.OperationID, op.RequestBody.Required)
		}
		// Written out in each webhook, as components/parameters has them.
		var headers []string
		for _, p := range op.Parameters {
			if p.In != "header" || !p.Required || doc.Components.Parameters[p.Name] != p {
				t.Errorf("%s: parameter %+v, want a required header as components/parameters has it", name, p)
			}
			headers = append(headers, p.Name)
		}
		if !slices.Equal(headers, []string{"webhook-id", "webhook-timestamp", "webhook-signature"}) {
			t.Errorf("%s: headers %v, want the Standard Webhooks ones", name, headers)
		}

		media, ok := op.RequestBody.Content["application/json"]
		if !ok {
			t.Errorf("%s: no application/json body", name)
			continue
		}
		// The recorded kinds' envelopes are components, the alias's is
		// written out (no path names it).
		var body struct {
			Ref string `json:"$ref"`
		}
		if err := json.Unmarshal(media.Schema, &body); err != nil {
			t.Fatal(err)
		}
		env, at := objectSchema{}, "#/webhooks/"+name+"/post/requestBody/content/application~1json/schema"
		if body.Ref != "" {
			env, at = schemaAt(t, doc, body.Ref), body.Ref
		} else if err := json.Unmarshal(media.Schema, &env); err != nil {
			t.Fatal(err)
		}
		if (body.Ref == "") != (name == "engagement_letter.signed") {
			t.Errorf("%s: envelope %s", name, media.Schema)
		}
		for _, f := range []string{"id", "event", "occurred_at", "firm", "sandbox", "data"} {
			if !slices.Contains(env.Required, f) {
				t.Errorf("%s: the envelope does not require %s", name, f)
			}
		}
		if env.Properties["event"].Const != name || env.AdditionalProperties == nil || *env.AdditionalProperties {
			t.Errorf("%s: envelope event %q, additionalProperties %v", name, env.Properties["event"].Const, env.AdditionalProperties)
		}
		data := schemaAt(t, doc, env.Properties["data"].Ref)
		for _, f := range append(spec.fields, "object") {
			if _, ok := data.Properties[f]; !ok {
				t.Errorf("%s: data has no %s", name, f)
			}
		}
		if got := data.Properties["object"].Ref; got != "#/components/schemas/"+spec.object {
			t.Errorf("%s: object is %s, want the %s record", name, got, spec.object)
		}

		schema, err := c.Compile("/v1/openapi.json" + at)
		if err != nil {
			t.Fatal(err)
		}
		example := decodeJSON(t, media.Example)
		if err := schema.Validate(example); err != nil {
			t.Errorf("%s: the example does not match its schema: %v", name, err)
		}
		if example.(map[string]any)["event"] != name {
			t.Errorf("%s: the example is of %v", name, example.(map[string]any)["event"])
		}
	}
}

// TestEventComponentIsEveryRecordedKind checks that the Event the event
// routes answer is any recorded kind, and never an alias, which is only a
// delivery name.
func TestEventComponentIsEveryRecordedKind(t *testing.T) {
	var doc catalogDoc
	if err := json.Unmarshal(servedDocument(t), &doc); err != nil {
		t.Fatal(err)
	}
	var event struct {
		OneOf []struct {
			Ref string `json:"$ref"`
		}
	}
	if err := json.Unmarshal(doc.Components.Schemas["Event"], &event); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, alt := range event.OneOf {
		got = append(got, schemaAt(t, doc, alt.Ref).Properties["event"].Const)
	}
	if !slices.Equal(got, dispatcher.Kinds()) {
		t.Fatalf("Event is any of %v, want %v", got, dispatcher.Kinds())
	}
}
