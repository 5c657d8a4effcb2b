package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// The event catalog: the document's top-level webhooks, one per event kind
// and alias, read from the dispatcher's table of kinds (dispatcher.Catalog)
// and the Go types its payloads are encoded from. Each kind has a component
// for its envelope ({Kind}Event) and its data ({Kind}Data); the Event
// component, which the event routes answer, is any of the recorded kinds.

// envelopeNotes annotates the envelope's fields, by JSON name. A name the
// envelope does not have is an error, so a renamed field cannot leave its
// description behind.
var envelopeNotes = map[string]map[string]any{
	"id": {"pattern": "^evt_",
		"description": "The same on every delivery attempt and replay, and the webhook-id header: de-duplicate on it."},
	"event":       {"description": "The event kind, or the alias the endpoint subscribed to."},
	"occurred_at": {"format": "date-time", "description": "When the change happened, to the millisecond; sort on it."},
	"firm":        {"pattern": "^frm_"},
	"sandbox":     {"description": "True for the firm's sandbox records, whose events reach only endpoints registered with a sandbox credential."},
	"data":        {"description": "The ids the event names and the full record after the change as object."},
}

// webhookHeaders are the Standard Webhooks headers every delivery carries.
var webhookHeaders = []struct {
	name, desc string
	schema     map[string]any
}{
	{dispatcher.HeaderID, "The event's id: the same on every attempt and replay, so de-duplicate on it.",
		map[string]any{"type": "string", "pattern": "^evt_"}},
	{dispatcher.HeaderTimestamp, "When this attempt was signed, in seconds since the Unix epoch. Refuse a delivery far from your clock (five minutes is usual) to stop replays of an old one.",
		map[string]any{"type": "integer"}},
	{dispatcher.HeaderSignature, `One "v1,<base64 signature>" per valid secret, space-separated (two for 24 hours after rotate_secret): the HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}" keyed with the base64-decoded part of the whsec_ secret after the prefix. Accept the delivery when any one matches.`,
		map[string]any{"type": "string", "pattern": `^v1,[A-Za-z0-9+/]+={0,2}( v1,[A-Za-z0-9+/]+={0,2})*$`}},
}

const webhookDescription = "Sent as a POST to every enabled endpoint of the firm's mode (live or sandbox) subscribed to it, signed with the Standard Webhooks headers. " +
	"Answer 2xx within 15 seconds; anything else, a redirect or a timeout is a failed attempt, retried with exponential backoff and jitter, six attempts in all. " +
	"Deliveries can arrive more than once and out of order: de-duplicate on the id and sort on occurred_at."

// eventCatalog registers each kind's components and returns the webhooks
// section.
func (s schemaSet) eventCatalog() (map[string]any, error) {
	env := s.structSchema(reflect.TypeOf(dispatcher.EnvelopeShape()))
	envProps := env["properties"].(map[string]any)
	for name, note := range envelopeNotes {
		p, ok := envProps[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("event catalog: the envelope has no field %q", name)
		}
		for k, v := range note {
			p[k] = v
		}
	}
	examples, err := catalogExamples()
	if err != nil {
		return nil, err
	}

	webhooks := map[string]any{}
	var recorded []any
	mapping := map[string]any{}
	for _, k := range dispatcher.Catalog() {
		data := componentName(k.Name) + "Data"
		if k.AliasOf != "" {
			data = componentName(k.AliasOf) + "Data"
		} else {
			schema, err := s.eventData(k)
			if err != nil {
				return nil, err
			}
			s[data] = schema
		}
		event := componentName(k.Name) + "Event"
		s[event] = envelopeOf(env, k.Name, data)
		if k.AliasOf == "" {
			recorded = append(recorded, ref(event))
			mapping[k.Name] = "#/components/schemas/" + event
		}

		desc := webhookDescription
		if k.AliasOf != "" {
			desc = "The " + k.AliasOf + " event (the same id) under this name, for endpoints subscribed to this name and not to " +
				k.AliasOf + ": an endpoint receives each event once, under " + k.AliasOf + " when subscribed to both. " + desc
		}
		// The headers are written out in each webhook, and the alias's
		// envelope too (the recorded kinds' are Event's): a generator that
		// reads paths alone (oapi-codegen) prunes the components only
		// webhooks name, then types the webhooks with what it pruned.
		// components/parameters keep the headers for clients that name them.
		params := make([]any, 0, len(webhookHeaders))
		for _, h := range webhookHeaders {
			params = append(params, webhookParameter(h.name, h.desc, h.schema))
		}
		body := ref(event)
		if k.AliasOf != "" {
			body = s[event].(map[string]any)
		}
		webhooks[k.Name] = map[string]any{"post": map[string]any{
			"operationId": "on_" + strings.NewReplacer(".", "_").Replace(k.Name),
			"summary":     k.Summary,
			"description": desc,
			"tags":        []string{"events"},
			"security":    []any{},
			"parameters":  params,
			"requestBody": map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": body, "example": examples[k.Name]}}},
			"responses": map[string]any{
				"2XX":     map[string]any{"description": "Accepted. The body of the answer is ignored."},
				"410":     map[string]any{"description": "Disables the endpoint: nothing more is sent to it until it is enabled again."},
				"default": map[string]any{"description": "A failed attempt, retried on the schedule; a Retry-After on a 429 or 503 is honoured within bounds."},
			},
		}}
	}
	s["Event"] = map[string]any{
		"description":   "A recorded event: the envelope a webhook delivers, under the kind's own name.",
		"oneOf":         recorded,
		"discriminator": map[string]any{"propertyName": "event", "mapping": mapping},
	}
	return webhooks, nil
}

// eventData describes a kind's data: its payload type's fields, with
// object the kind's record.
func (s schemaSet) eventData(k dispatcher.KindSpec) (map[string]any, error) {
	resource, ok := resourceTypes[k.Resource]
	if !ok {
		return nil, fmt.Errorf("event catalog: %s carries %q, which is not a resource", k.Name, k.Resource)
	}
	schema := s.structSchema(reflect.TypeOf(k.Data))
	props := schema["properties"].(map[string]any)
	if _, ok := props["object"]; !ok {
		return nil, fmt.Errorf("event catalog: the data of %s has no object", k.Name)
	}
	props["object"] = map[string]any{"$ref": s.schemaOf(reflect.TypeOf(resource))["$ref"],
		"description": "The " + k.Resource.Singular() + " after the change, as GET /v1/" + string(k.Resource) + "/{id} would answer it then."}
	if k.Removal {
		props["object"] = map[string]any{"$ref": s.schemaOf(reflect.TypeOf(practice.Tombstone{}))["$ref"],
			"description": "The " + k.Resource.Singular() + "'s tombstone, as GET /v1/" + string(k.Resource) + "?include_deleted=true lists it: its version follows the record's last."}
	}
	record := reflect.TypeOf(resource).Name()
	for name, p := range props {
		// A field repeating one of the record's shares its vocabulary.
		if e, ok := enums[record+"."+strings.TrimPrefix(name, "previous_")]; ok {
			p.(map[string]any)["enum"] = e
		}
		singular, isID := strings.CutSuffix(name, "_id")
		for _, kind := range practice.Kinds {
			if isID && kind.Singular() == singular {
				p.(map[string]any)["pattern"] = "^" + kind.IDPrefix()
			}
		}
	}
	if ids, ok := props["released_jobs"].(map[string]any); ok {
		ids["items"] = map[string]any{"type": "string", "pattern": "^" + practice.Jobs.IDPrefix()}
		ids["description"] = "The ids of the jobs the signing released."
	}
	return schema, nil
}

// envelopeOf is the envelope of one event name, its data a component.
func envelopeOf(env map[string]any, name, data string) map[string]any {
	props := map[string]any{}
	for k, v := range env["properties"].(map[string]any) {
		props[k] = v
	}
	event := map[string]any{"const": name}
	for k, v := range props["event"].(map[string]any) {
		event[k] = v
	}
	props["event"] = event
	props["data"] = map[string]any{"$ref": ref(data)["$ref"], "description": envelopeNotes["data"]["description"]}
	out := map[string]any{}
	for k, v := range env {
		out[k] = v
	}
	out["properties"] = props
	return out
}

func ref(component string) map[string]any {
	return map[string]any{"$ref": "#/components/schemas/" + component}
}

// componentName turns an event name into a component name:
// job.stage_changed is JobStageChanged.
func componentName(event string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(event, func(r rune) bool { return r == '.' || r == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// catalogExamples gives each event name its example: what Derive makes of
// a change that raises the kind, delivered under the name. The examples
// are therefore exactly what the dispatcher sends.
func catalogExamples() (map[string]any, error) {
	changes, err := exampleChanges()
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, k := range dispatcher.Catalog() {
		kind := k.Name
		if k.AliasOf != "" {
			kind = k.AliasOf
		}
		c, ok := changes[kind]
		if !ok {
			return nil, fmt.Errorf("event catalog: no example change raises %s", kind)
		}
		events, err := dispatcher.Derive(c)
		if err != nil {
			return nil, fmt.Errorf("event catalog: example of %s: %w", kind, err)
		}
		var body []byte
		for _, ev := range events {
			if ev.Event == kind {
				if body, err = ev.Envelope(k.Name); err != nil {
					return nil, err
				}
			}
		}
		if body == nil {
			return nil, fmt.Errorf("event catalog: the example change for %s raises no such event", kind)
		}
		// As sent, in the contract's field order.
		out[k.Name] = json.RawMessage(body)
	}
	return out, nil
}

// exampleChanges makes, for each event kind, a change that raises it, from
// one client's records.
func exampleChanges() (map[string]practice.Change, error) {
	at := time.Date(2026, 3, 12, 14, 5, 31, 482_000_000, time.UTC)
	r := exampleRecords(at)
	client, job, engagement, document, invoice := r.client, r.job, r.engagement, r.document, r.invoice
	var (
		movedFrom = with(job, func(j *practice.Job) { j.Stage = "in_progress"; j.Version-- })
		completed = with(job, func(j *practice.Job) { j.Stage = "completed"; j.ClosedAt = &at; j.Version++ })
		opened    = with(job, func(j *practice.Job) { j.Stage = "planned"; j.CreatedAt = &at; j.Version = 1 })
		sent      = with(engagement, func(e *practice.Engagement) { e.Status = "sent"; e.SignedAt = nil; e.Version-- })
		proposed  = with(sent, func(e *practice.Engagement) {
			e.Status = "proposed"
			e.CreatedAt = &at
			e.Version = 1
		})
		issued = with(invoice, func(i *practice.Invoice) {
			i.Status = "issued"
			i.AmountDue = i.Total
			i.PaidAt = nil
			i.SettledVia = ""
			i.Version--
		})
		draft          = with(issued, func(i *practice.Invoice) { i.Status = "draft"; i.IssuedOn = ""; i.DueOn = ""; i.Version-- })
		newClient      = with(client, func(c *practice.Client) { c.Status = "prospect"; c.CreatedAt = &at; c.Version = 1 })
		previousClient = with(client, func(c *practice.Client) { c.Email = "office@hartley-sons.example"; c.Version-- })
	)
	changes := map[string]practice.Change{}
	for _, e := range []struct {
		event         string
		kind          practice.Kind
		before, after any
		note          string
	}{
		{dispatcher.ClientCreated, practice.Clients, nil, newClient, ""},
		{dispatcher.ClientUpdated, practice.Clients, previousClient, client, ""},
		{dispatcher.EngagementCreated, practice.Engagements, nil, proposed, ""},
		{dispatcher.EngagementSigned, practice.Engagements, sent, engagement, ""},
		{dispatcher.JobOpened, practice.Jobs, nil, opened, ""},
		{dispatcher.JobStageChanged, practice.Jobs, movedFrom, job, "Draft accounts ready for partner review"},
		{dispatcher.JobClosed, practice.Jobs, job, completed, "Accounts filed and approved"},
		{dispatcher.DocumentFiled, practice.Documents, nil, document, ""},
		{dispatcher.InvoiceRaised, practice.Invoices, draft, issued, ""},
		{dispatcher.InvoicePaid, practice.Invoices, issued, invoice, ""},
		{dispatcher.ClientDeleted, practice.Clients, client, nil, ""},
		{dispatcher.JobDeleted, practice.Jobs, completed, nil, ""},
		{dispatcher.DocumentDeleted, practice.Documents, document, nil, ""},
		{dispatcher.InvoiceDeleted, practice.Invoices, draft, nil, ""},
		{dispatcher.PersonDeleted, practice.People, r.person, nil, ""},
	} {
		c, err := exampleChange(e.event, e.kind, e.before, e.after, e.note, at)
		if err != nil {
			return nil, err
		}
		changes[e.event] = c
	}
	return changes, nil
}

// exampleSet is one firm's records as the examples show them.
type exampleSet struct {
	client     practice.Client
	job        practice.Job
	engagement practice.Engagement
	document   practice.Document
	invoice    practice.Invoice
	person     practice.Person
}

// exampleRecords are the examples' records, each last changed at.
func exampleRecords(at time.Time) exampleSet {
	signedAt := at.Add(-3 * time.Minute)
	client := practice.Client{ID: "cli_01KKH3Z8Q4V7N2B6T9R5W1M0XC", Object: "client", Name: "Hartley & Sons Ltd",
		Type: "company", Status: "active", Owner: practice.Known("usr_01KF0M7C2R9T4V6X8Z1B3N5Q7W"), Email: "accounts@hartley-sons.example",
		Country: "GB", Contacts: []practice.Contact{{Name: "Ruth Hartley", Role: "Director", Email: "ruth@hartley-sons.example"}},
		LastActivityAt: at, CreatedAt: practice.KnownAt(at.AddDate(-3, 0, 0)), UpdatedAt: at, Version: 7}
	job := practice.Job{ID: "job_01KKH40A6D3F8H1K5M7P9S2U4W", Object: "job", Title: "Year-end accounts 2025-26",
		Type: "Year-end accounts", Client: &client.ID, Engagement: "eng_01KKF9X2C5E7G9J1L3N5Q7S9U1", Owner: client.Owner,
		Stage: "in_review", Deadline: "2026-12-31", CreatedAt: &signedAt, UpdatedAt: at, Version: 4}
	// As a firm's proposal system gives it: a quote's title and tasks, no
	// jobs linked (no vendor publishes the link), and in an event no
	// letters (they are linked as the engagement is read).
	engagement := practice.Engagement{ID: job.Engagement, Object: "engagement", Client: &client.ID, Status: "signed",
		Scope: "Year-end accounts 2025-26: Accounts preparation, Corporation tax return",
		Fee:   practice.Money{Amount: "2450.00", Currency: "GBP"}, Billing: "fixed",
		ReleasedJobs: []string{}, SignedAt: &signedAt, CreatedAt: practice.KnownAt(at.AddDate(0, 0, -9)), UpdatedAt: at, Version: 3}
	document := practice.Document{ID: "doc_01KKH3ZT5B8D1F4H6K9M2P5R8T", Object: "document",
		Name: "Engagement letter 2025-26 (signed).pdf", Kind: "signed_engagement_letter", Client: &client.ID,
		MimeType: "application/pdf", SizeBytes: 184_320,
		Location: practice.Location{Provider: "sharepoint", Path: "/Clients/Hartley & Sons Ltd/Engagements/Engagement letter 2025-26 (signed).pdf",
			ItemID: "01BYE5RZ6QN3ZWBTUFOFD3GSPGOHDJD36K"},
		FiledAt: at, CreatedAt: at, UpdatedAt: at, Version: 1}
	invoice := practice.Invoice{ID: "inv_01KKH41B7E4G9J2L6N8Q0T3V5X", Object: "invoice", Number: practice.Known("INV-2026-0142"),
		Client: &client.ID, Status: "paid", Total: practice.Money{Amount: "2940.00", Currency: "GBP"},
		AmountDue: practice.Money{Amount: "0.00", Currency: "GBP"}, IssuedOn: "2026-02-10", DueOn: "2026-03-12",
		PaidAt: &at, SettledVia: "bank_transfer", CreatedAt: practice.KnownAt(at.AddDate(0, 0, -30)), UpdatedAt: at, Version: 3}
	person := practice.Person{ID: *client.Owner, Object: "person", Name: "Priya Shah", Email: practice.Known("priya@acme-accountants.example"),
		Role: "Manager", Active: true, CreatedAt: practice.KnownAt(at.AddDate(-2, 0, 0)), UpdatedAt: at, Version: 5}
	return exampleSet{client: client, job: job, engagement: engagement, document: document, invoice: invoice, person: person}
}

// exampleChange is the change an event of kind is made from: before and
// after as records (nil for none); a removal's after is null and the
// change names the record.
func exampleChange(event string, kind practice.Kind, before, after any, note string, at time.Time) (practice.Change, error) {
	c := practice.Change{ID: "chg_example_" + event, Firm: "frm_acme", Kind: kind, OccurredAt: at, Note: note}
	var err error
	if before != nil {
		if c.Before, err = practice.Marshal(before); err != nil {
			return c, err
		}
	}
	if after == nil {
		var rec struct {
			ID string `json:"id"`
		}
		err = json.Unmarshal(c.Before, &rec)
		c.ResourceID, c.After = rec.ID, json.RawMessage("null")
		return c, err
	}
	c.After, err = practice.Marshal(after)
	return c, err
}

// with returns a copy of v edited by edit.
func with[T any](v T, edit func(*T)) T {
	edit(&v)
	return v
}

// webhookParameters are the signing headers as parameter components.
func webhookParameters() map[string]any {
	out := map[string]any{}
	for _, h := range webhookHeaders {
		out[h.name] = webhookParameter(h.name, h.desc, h.schema)
	}
	return out
}

func webhookParameter(name, desc string, schema map[string]any) map[string]any {
	return map[string]any{"name": name, "in": "header", "required": true, "description": desc, "schema": schema}
}
