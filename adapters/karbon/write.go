package karbon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters"
	"github.com/practicegw/practicegw/adapters/upstream"
)

// Writes go to Karbon and come back as Karbon then has the record: every
// write ends with a fresh read, so the answer is what the next GET shows.
// Karbon's PUT replaces a record whole, so updates that need one (status,
// owner, cards, a work item's status or client) send back the record as
// read, restricted to the fields Karbon's write schema names, with the
// change applied.

// CreateClient creates a Karbon contact (type individual) or organization
// (any other type). Contacts of a client are Karbon records of their own
// and are not created here.
func (a *Adapter) CreateClient(ctx context.Context, t adapters.Tenant, in adapters.ClientInput) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("karbon: no records for %s: %w", t, adapters.ErrNotFound)
	}
	if err := a.checkClientInput(in, true); err != nil {
		return nil, err
	}
	typ, status := "company", "active"
	set(&typ, in.Type)
	set(&status, in.Status)
	body := map[string]any{"ContactType": a.statusFor(status)}
	if in.Owner != nil {
		key, err := a.ownerKey(ctx, *in.Owner)
		if err != nil {
			return nil, err
		}
		body["ClientOwner"] = key
	}
	if card := newCard(in); card != nil {
		body["BusinessCards"] = []any{card}
	}
	ref := clientRef{kind: 'o'}
	if typ == "individual" {
		ref.kind = 'c'
		first, last, ok := splitName(*in.Name)
		if !ok {
			return nil, adapters.Invalid("name", "A Karbon contact needs a first and a last name.")
		}
		body["FirstName"], body["LastName"] = first, last
	} else {
		body["FullName"] = *in.Name
		body["AccountingDetail"] = map[string]any{"EntityType": clientEntityType(typ)}
	}
	var created struct{ ContactKey, OrganizationKey string }
	if err := a.send(ctx, http.MethodPost, "/v3/"+ref.collection(), body, &created, "client"); err != nil {
		return nil, err
	}
	ref.key = created.ContactKey + created.OrganizationKey
	if !validKey(ref.key) {
		return nil, upstream.Malformed(a.c.Label(), "created client", fmt.Errorf("key %q", ref.key))
	}
	after, err := a.getClient(ctx, ref)
	if err != nil {
		return nil, err
	}
	a.recordWrite(ctx, adapters.Clients, ref.id(), after, "")
	return after, nil
}

// UpdateClient changes a client's name, status, owner, email, phone or
// country (and an organization's type) in Karbon.
func (a *Adapter) UpdateClient(ctx context.Context, t adapters.Tenant, id string, in adapters.ClientInput) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("karbon: no records for %s: %w", t, adapters.ErrNotFound)
	}
	ref, ok := parseClientID(id)
	if !ok {
		return nil, notFound(adapters.Clients, id)
	}
	if err := a.checkClientInput(in, false); err != nil {
		return nil, err
	}
	if in.Type != nil {
		switch {
		case ref.kind == 'c' && *in.Type != "individual":
			return nil, adapters.Invalid("type", "This client is a Karbon contact, a person; its type stays individual.")
		case ref.kind == 'o' && *in.Type == "individual":
			return nil, adapters.Invalid("type", "This client is a Karbon organization; make the person a Karbon contact instead.")
		case ref.kind == 'g' && *in.Type != a.cfg.ClientGroupType:
			return nil, adapters.Invalid("type", "This client is a Karbon client group, whose type is %s.", a.cfg.ClientGroupType)
		}
	}
	before, err := a.getClient(ctx, ref)
	if err != nil {
		return nil, err
	}
	path := "/v3/" + ref.collection() + "/" + url.PathEscape(ref.key)
	expand := "?$expand=BusinessCards"
	if ref.kind == 'g' {
		expand = "?$expand=BusinessCard"
	}
	var current map[string]any
	if err := a.getJSON(ctx, path+expand, "client", &current); err != nil {
		return nil, fmt.Errorf("karbon: read client %s: %w", id, err)
	}
	body := pick(current, putFields[ref.kind])
	if in.Name != nil {
		if ref.kind == 'c' {
			first, last, ok := splitName(*in.Name)
			if !ok {
				return nil, adapters.Invalid("name", "A Karbon contact needs a first and a last name.")
			}
			body["FirstName"], body["LastName"] = first, last
			delete(body, "MiddleName")
		} else {
			body["FullName"] = *in.Name
		}
	}
	if in.Status != nil {
		body["ContactType"] = a.statusFor(*in.Status)
	}
	if in.Owner != nil {
		key, err := a.ownerKey(ctx, *in.Owner)
		if err != nil {
			return nil, err
		}
		body["ClientOwner"] = key
	}
	if in.Type != nil && ref.kind == 'o' {
		acc, _ := body["AccountingDetail"].(map[string]any)
		if acc == nil {
			acc = map[string]any{}
		}
		acc["EntityType"] = clientEntityType(*in.Type)
		body["AccountingDetail"] = acc
	}
	if in.Email != nil || in.Phone != nil || in.Country != nil {
		if ref.kind == 'g' {
			card, _ := current["BusinessCard"].(map[string]any)
			body["BusinessCard"] = editCard(card, in)
		} else {
			cards, _ := current["BusinessCards"].([]any)
			body["BusinessCards"] = editCards(cards, in)
		}
	}
	if err := a.send(ctx, http.MethodPut, path, body, nil, "client"); err != nil {
		return nil, err
	}
	after, err := a.getClient(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(before, after) {
		a.recordWrite(ctx, adapters.Clients, id, after, "")
	}
	return after, nil
}

// putFields are the fields of Karbon's write schemas (CreateContact,
// UpdateOrganization, CreateClientGroup) that a PUT sends back.
var putFields = map[byte][]string{
	'c': {"FirstName", "MiddleName", "LastName", "PreferredName", "Salutation", "Suffix", "RestrictionLevel",
		"ClientOwner", "ClientManager", "ContactType", "UserDefinedIdentifier", "EntityDescription", "AccountingDetail"},
	'o': {"FullName", "RestrictionLevel", "ClientOwner", "ClientManager", "ContactType", "UserDefinedIdentifier",
		"EntityDescription", "AccountingDetail"},
	'g': {"FullName", "RestrictionLevel", "ClientOwner", "ClientManager", "ContactType", "UserDefinedIdentifier",
		"EntityDescription", "PrimaryContact", "Members"},
}

// workPutFields are RequestCreateWorkItem's fields, less WorkStatus: when
// it and PrimaryStatus disagree Karbon goes by PrimaryStatus, so a move
// sends the primary and secondary status only.
var workPutFields = []string{"AssigneeEmailAddress", "Title", "ClientKey", "ClientType", "RelatedClientGroupKey",
	"StartDate", "DueDate", "DeadlineDate", "WorkType", "PrimaryStatus", "SecondaryStatus", "WorkTemplateKey",
	"WorkScheduleKey", "EstimatedBudget", "Description", "ClientTaskRecipient", "FeeSettings", "UserRoleAssignments"}

func (a *Adapter) checkClientInput(in adapters.ClientInput, create bool) error {
	if err := in.Validate(create); err != nil {
		return err
	}
	if in.Contacts != nil {
		return adapters.Invalid("contacts", "Karbon keeps a client's contacts as Karbon contacts of their own; add them in Karbon.")
	}
	return nil
}

// CreateJob creates a Karbon work item starting today, in Karbon's
// initial status.
func (a *Adapter) CreateJob(ctx context.Context, t adapters.Tenant, in adapters.JobInput) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("karbon: no records for %s: %w", t, adapters.ErrNotFound)
	}
	if err := a.checkJobInput(in, true); err != nil {
		return nil, err
	}
	ref, ok := parseClientID(*in.Client)
	if !ok {
		return nil, adapters.Invalid("client", "There is no client %s in this firm's Karbon.", *in.Client)
	}
	owner := a.cfg.DefaultAssignee
	set(&owner, in.Owner)
	if owner == "" {
		return nil, adapters.Missing("owner")
	}
	email, err := a.assigneeEmail(ctx, owner)
	if err != nil {
		return nil, err
	}
	today := a.clock.Now().UTC().Truncate(24 * time.Hour).Format(time.RFC3339)
	body := map[string]any{"Title": *in.Title, "ClientKey": ref.key, "ClientType": ref.clientType(),
		"AssigneeEmailAddress": email, "StartDate": today}
	if in.Type != nil {
		body["WorkType"] = *in.Type
	}
	if in.Deadline != nil {
		body["DeadlineDate"] = *in.Deadline + "T00:00:00Z"
	}
	var created workItem
	if err := a.send(ctx, http.MethodPost, "/v3/WorkItems", body, &created, "job"); err != nil {
		return nil, err
	}
	if !validKey(created.WorkItemKey) {
		return nil, upstream.Malformed(a.c.Label(), "created work item", fmt.Errorf("key %q", created.WorkItemKey))
	}
	after, err := a.getJob(ctx, created.WorkItemKey)
	if err != nil {
		return nil, err
	}
	a.recordWrite(ctx, adapters.Jobs, "job_"+created.WorkItemKey, after, "")
	return after, nil
}

// UpdateJob changes a work item's title, type, deadline or assignee with
// Karbon's PATCH, and its client with a PUT (PATCH cannot).
func (a *Adapter) UpdateJob(ctx context.Context, t adapters.Tenant, id string, in adapters.JobInput) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("karbon: no records for %s: %w", t, adapters.ErrNotFound)
	}
	key, ok := parseKey(id, "job_")
	if !ok {
		return nil, notFound(adapters.Jobs, id)
	}
	if err := a.checkJobInput(in, false); err != nil {
		return nil, err
	}
	before, err := a.getJob(ctx, key)
	if err != nil {
		return nil, err
	}
	patch := map[string]any{}
	if in.Title != nil {
		patch["Title"] = *in.Title
	}
	if in.Type != nil {
		patch["WorkType"] = *in.Type
	}
	if in.Deadline != nil {
		patch["DeadlineDate"] = *in.Deadline + "T00:00:00Z"
	}
	if in.Owner != nil {
		email, err := a.assigneeEmail(ctx, *in.Owner)
		if err != nil {
			return nil, err
		}
		patch["AssigneeEmailAddress"] = email
	}
	path := "/v3/WorkItems/" + url.PathEscape(key)
	if in.Client != nil {
		ref, ok := parseClientID(*in.Client)
		if !ok {
			return nil, adapters.Invalid("client", "There is no client %s in this firm's Karbon.", *in.Client)
		}
		err := a.putWork(ctx, key, func(body map[string]any) {
			for k, v := range patch {
				body[k] = v
			}
			body["ClientKey"], body["ClientType"] = ref.key, ref.clientType()
			delete(body, "RelatedClientGroupKey")
		})
		if err != nil {
			return nil, err
		}
	} else if len(patch) > 0 {
		if err := a.send(ctx, http.MethodPatch, path, patch, nil, "job"); err != nil {
			return nil, err
		}
	}
	after, err := a.getJob(ctx, key)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(before, after) {
		a.recordWrite(ctx, adapters.Jobs, id, after, "")
	}
	return after, nil
}

// MoveJob writes the Karbon status that stands for the stage (see
// Config.StageMap) and puts the note on the work item's timeline when
// Config.NoteAuthor is set. The job comes back as Karbon now has it.
func (a *Adapter) MoveJob(ctx context.Context, t adapters.Tenant, id string, move adapters.StageMove) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("karbon: no records for %s: %w", t, adapters.ErrNotFound)
	}
	key, ok := parseKey(id, "job_")
	if !ok {
		return nil, notFound(adapters.Jobs, id)
	}
	if err := move.Validate(); err != nil {
		return nil, err
	}
	statuses, err := a.workStatuses(ctx)
	if err != nil {
		return nil, err
	}
	primary, secondary, ok := a.stages.target(statuses, move.Stage)
	if !ok {
		return nil, &adapters.InvalidError{Code: "invalid_stage", Param: "stage",
			Message: fmt.Sprintf("This firm's Karbon has no work status for the stage %q; map one in its stage_map.", move.Stage)}
	}
	err = a.putWork(ctx, key, func(body map[string]any) {
		body["PrimaryStatus"] = primary
		body["SecondaryStatus"] = secondary
		if secondary == "" {
			delete(body, "SecondaryStatus")
		}
	})
	if err != nil {
		return nil, err
	}
	if move.Note != "" && a.cfg.NoteAuthor != "" {
		note := map[string]any{
			"Subject": "Moved to " + strings.ReplaceAll(move.Stage, "_", " "), "Body": move.Note,
			"AuthorEmailAddress": a.cfg.NoteAuthor,
			"Timelines":          []any{map[string]string{"EntityType": "WorkItem", "EntityKey": key}},
		}
		// The move is done; a note that fails is worth a warning, not
		// an error that would make the caller move the job again.
		if err := a.send(ctx, http.MethodPost, "/v3/Notes", note, nil, "note"); err != nil {
			a.log.Warn("stage move note not written", zap.String("job", id), zap.Error(err))
		}
	}
	after, err := a.getJob(ctx, key)
	if err != nil {
		return nil, err
	}
	a.recordWrite(ctx, adapters.Jobs, id, after, move.Note)
	return after, nil
}

// putWork reads a work item, lets edit change it and puts it back whole.
func (a *Adapter) putWork(ctx context.Context, key string, edit func(map[string]any)) error {
	path := "/v3/WorkItems/" + url.PathEscape(key)
	var current map[string]any
	if err := a.getJSON(ctx, path, "work item", &current); err != nil {
		return fmt.Errorf("karbon: read work item %s: %w", key, err)
	}
	body := pick(current, workPutFields)
	edit(body)
	return a.send(ctx, http.MethodPut, path, body, nil, "job")
}

func (a *Adapter) checkJobInput(in adapters.JobInput, create bool) error {
	if err := in.Validate(create); err != nil {
		return err
	}
	if in.Engagement != nil && *in.Engagement != "" {
		return adapters.Invalid("engagement", "Karbon has no engagements; leave engagement out for this firm's jobs.")
	}
	return nil
}

// ownerKey checks that a usr_ id is a Karbon user and returns its key,
// which Karbon accepts wherever it takes a user.
func (a *Adapter) ownerKey(ctx context.Context, owner string) (string, error) {
	key, ok := parseKey(owner, "usr_")
	if !ok {
		return "", adapters.Invalid("owner", "The owner must be a person's id, such as usr_2bYxtn94ZSdY.")
	}
	dir, err := a.directory(ctx)
	if err != nil {
		return "", err
	}
	if dir.email(key) == "" {
		return "", adapters.Invalid("owner", "There is no person %s in this firm's Karbon.", owner)
	}
	return key, nil
}

// assigneeEmail is the email Karbon's work items name an assignee by, for
// a usr_ id or an email.
func (a *Adapter) assigneeEmail(ctx context.Context, owner string) (string, error) {
	dir, err := a.directory(ctx)
	if err != nil {
		return "", err
	}
	if key, ok := parseKey(owner, "usr_"); ok {
		if e := dir.email(key); e != "" {
			return e, nil
		}
	} else if key := dir.key(owner); key != "" {
		return dir.email(key), nil
	}
	return "", adapters.Invalid("owner", "There is no person %s in this firm's Karbon.", owner)
}

// send makes a write and decodes the answer into out (nil: ignore it). A
// Karbon 400 becomes a parameter_invalid naming the field Karbon named.
func (a *Adapter) send(ctx context.Context, method, path string, body any, out any, what string) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("karbon: encode %s: %w", what, err)
	}
	_, err = a.c.JSON(ctx, upstream.Request{Method: method, Path: path, Body: b}, what, out)
	if err == nil {
		return nil
	}
	var s *upstream.StatusError
	if errors.As(err, &s) && (s.Status == http.StatusBadRequest || s.Status == http.StatusUnprocessableEntity) {
		return karbonInvalid(s.Body, what)
	}
	return fmt.Errorf("karbon: write %s: %w", what, err)
}

// karbonInvalid reads Karbon's error body ({"error":{"code","message",
// "details"}}, details an object or a list) into a parameter_invalid.
func karbonInvalid(body []byte, what string) error {
	var e struct {
		Error struct {
			Message string
			Details json.RawMessage
		} `json:"error"`
	}
	json.Unmarshal(body, &e)
	type detail struct{ Target, Message string }
	var ds []detail
	var d detail
	if json.Unmarshal(e.Error.Details, &d) == nil && d.Target != "" {
		ds = append(ds, d)
	} else {
		json.Unmarshal(e.Error.Details, &ds)
	}
	param, msg := what, e.Error.Message
	if len(ds) > 0 {
		param, msg = paramOf(ds[0].Target, what), ds[0].Message
	}
	if msg == "" {
		msg = "Karbon refused the " + what + "."
	}
	return &adapters.InvalidError{Code: "parameter_invalid", Param: param, Message: "Karbon refused the " + what + ": " + msg}
}

// paramOf names our field for a Karbon property ("workItem.ClientKey").
func paramOf(target, fallback string) string {
	prop := target[strings.LastIndexByte(target, '.')+1:]
	switch prop {
	case "ClientKey", "ClientType":
		return "client"
	case "AssigneeEmailAddress", "ClientOwner":
		return "owner"
	case "Title":
		return "title"
	case "WorkType":
		return "type"
	case "DeadlineDate":
		return "deadline"
	case "FirstName", "LastName", "FullName":
		return "name"
	case "ContactType":
		return "status"
	}
	return fallback
}

// recordWrite publishes the change a write made, when Deps.Changes is
// set. The write has happened, so a failure here is logged: the vendor's
// webhook reports the same change.
func (a *Adapter) recordWrite(ctx context.Context, k adapters.Kind, id string, after json.RawMessage, note string) {
	if a.changes == nil {
		return
	}
	if _, err := a.rec.Observe(ctx, a.changes, upstream.Observation{Tenant: a.tenant(), Kind: k, ResourceID: id, After: after, Note: note}); err != nil {
		a.log.Warn("change of a write not recorded", zap.String("id", id), zap.Error(err))
	}
}

func pick(m map[string]any, keys []string) map[string]any {
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		if v, ok := m[k]; ok && v != nil {
			out[k] = v
		}
	}
	return out
}

func set(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}

// splitName splits a person's name into Karbon's first and last names.
func splitName(name string) (first, last string, ok bool) {
	f := strings.Fields(name)
	if len(f) < 2 {
		return "", "", false
	}
	return strings.Join(f[:len(f)-1], " "), f[len(f)-1], true
}

// newCard is the primary business card of a new client, nil when in sets
// nothing a card holds.
func newCard(in adapters.ClientInput) map[string]any {
	if in.Email == nil && in.Phone == nil && in.Country == nil {
		return nil
	}
	return editCard(map[string]any{"IsPrimaryCard": true}, in)
}

func editCards(cards []any, in adapters.ClientInput) []any {
	for i, c := range cards {
		if m, ok := c.(map[string]any); ok && m["IsPrimaryCard"] == true {
			cards[i] = editCard(m, in)
			return cards
		}
	}
	if len(cards) > 0 {
		if m, ok := cards[0].(map[string]any); ok {
			cards[0] = editCard(m, in)
			return cards
		}
	}
	return []any{editCard(map[string]any{"IsPrimaryCard": true}, in)}
}

// editCard sets the first email, phone number and address country of a
// card, keeping its key and the rest so Karbon updates rather than
// replaces it.
func editCard(card map[string]any, in adapters.ClientInput) map[string]any {
	if card == nil {
		card = map[string]any{"IsPrimaryCard": true}
	}
	first := func(field string, set func(map[string]any)) {
		list, _ := card[field].([]any)
		var m map[string]any
		if len(list) > 0 {
			m, _ = list[0].(map[string]any)
		}
		if m == nil {
			m = map[string]any{}
			list = append([]any{m}, list...)
		}
		set(m)
		card[field] = list
	}
	if in.Email != nil {
		emails, _ := card["EmailAddresses"].([]any)
		if len(emails) > 0 {
			emails[0] = *in.Email
		} else {
			emails = []any{*in.Email}
		}
		card["EmailAddresses"] = emails
	}
	if in.Phone != nil {
		first("PhoneNumbers", func(m map[string]any) {
			m["Number"] = *in.Phone
			if m["Label"] == nil {
				m["Label"] = "Work"
			}
		})
	}
	if in.Country != nil {
		first("Addresses", func(m map[string]any) {
			m["CountryCode"] = strings.ToUpper(*in.Country)
			if m["Label"] == nil {
				m["Label"] = "Physical"
			}
		})
	}
	return card
}
