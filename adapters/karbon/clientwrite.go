package karbon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// CreateClient creates a Karbon contact (type individual) or organization
// (any other type). Contacts of a client are Karbon records of their own
// and are not created here.
func (a *Adapter) CreateClient(ctx context.Context, t practice.Tenant, in practice.ClientInput) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("karbon: no records for %s: %w", t, practice.ErrNotFound)
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
			return nil, practice.Invalid("name", "A Karbon contact needs a first and a last name.")
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
	a.recordWrite(ctx, practice.Clients, ref.id(), nil, after, "")
	return after, nil
}

// UpdateClient changes a client's name, status, owner, email, phone or
// country (and an organization's type) in Karbon.
func (a *Adapter) UpdateClient(ctx context.Context, t practice.Tenant, id string, in practice.ClientInput) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("karbon: no records for %s: %w", t, practice.ErrNotFound)
	}
	ref, ok := parseClientID(id)
	if !ok {
		return nil, notFound(practice.Clients, id)
	}
	if err := a.checkClientInput(in, false); err != nil {
		return nil, err
	}
	if err := a.checkTypeKept(ref, in.Type); err != nil {
		return nil, err
	}
	before, err := a.getClient(ctx, ref)
	if err != nil {
		return nil, err
	}
	path := "/v3/" + ref.collection() + "/" + url.PathEscape(ref.key)
	current, err := a.writableClient(ctx, ref, path)
	if err != nil {
		return nil, fmt.Errorf("karbon: read client %s: %w", id, err)
	}
	body, err := a.clientPutBody(ctx, ref, current, in)
	if err != nil {
		return nil, err
	}
	if err := a.send(ctx, http.MethodPut, path, body, nil, "client"); err != nil {
		return nil, err
	}
	after, err := a.getClient(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(before, after) {
		a.recordWrite(ctx, practice.Clients, id, before, after, "")
	}
	return after, nil
}

// checkTypeKept refuses a type that would turn the client into another
// kind of Karbon record: Karbon cannot change a record's kind.
func (a *Adapter) checkTypeKept(ref clientRef, typ *string) error {
	if typ == nil {
		return nil
	}
	switch {
	case ref.kind == 'c' && *typ != "individual":
		return practice.Invalid("type", "This client is a Karbon contact, a person; its type stays individual.")
	case ref.kind == 'o' && *typ == "individual":
		return practice.Invalid("type", "This client is a Karbon organization; make the person a Karbon contact instead.")
	case ref.kind == 'g' && *typ != a.cfg.ClientGroupType:
		return practice.Invalid("type", "This client is a Karbon client group, whose type is %s.", a.cfg.ClientGroupType)
	}
	return nil
}

// writableClient reads the client at path as Karbon keeps it, business
// cards included, for a PUT to send back.
func (a *Adapter) writableClient(ctx context.Context, ref clientRef, path string) (map[string]any, error) {
	expand := "?$expand=BusinessCards"
	if ref.kind == 'g' {
		expand = "?$expand=BusinessCard"
	}
	var current map[string]any
	if err := a.getJSON(ctx, path+expand, "client", &current); err != nil {
		return nil, err
	}
	return current, nil
}

// clientPutBody is the PUT that changes what in sets. A PUT sends back the
// fields of Karbon's write schema, so it starts from the current ones and
// keeps whatever in leaves unset.
func (a *Adapter) clientPutBody(ctx context.Context, ref clientRef, current map[string]any, in practice.ClientInput) (map[string]any, error) {
	body := pick(current, putFields[ref.kind])
	if in.Name != nil {
		if err := setClientName(body, ref, *in.Name); err != nil {
			return nil, err
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
		setEntityType(body, *in.Type)
	}
	if in.Email != nil || in.Phone != nil || in.Country != nil {
		setCards(body, current, ref, in)
	}
	return body, nil
}

// setClientName sets a contact's first and last names (dropping a middle
// name the new name does not have), or another record's full name.
func setClientName(body map[string]any, ref clientRef, name string) error {
	if ref.kind != 'c' {
		body["FullName"] = name
		return nil
	}
	first, last, ok := splitName(name)
	if !ok {
		return practice.Invalid("name", "A Karbon contact needs a first and a last name.")
	}
	body["FirstName"], body["LastName"] = first, last
	delete(body, "MiddleName")
	return nil
}

// setEntityType sets an organization's entity type, keeping the rest of
// its accounting detail.
func setEntityType(body map[string]any, typ string) {
	acc, _ := body["AccountingDetail"].(map[string]any)
	if acc == nil {
		acc = map[string]any{}
	}
	acc["EntityType"] = clientEntityType(typ)
	body["AccountingDetail"] = acc
}

// setCards edits the client's primary business card: a client group has
// one card, contacts and organizations a list of them.
func setCards(body, current map[string]any, ref clientRef, in practice.ClientInput) {
	if ref.kind == 'g' {
		card, _ := current["BusinessCard"].(map[string]any)
		body["BusinessCard"] = editCard(card, in)
		return
	}
	cards, _ := current["BusinessCards"].([]any)
	body["BusinessCards"] = editCards(cards, in)
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

func (a *Adapter) checkClientInput(in practice.ClientInput, create bool) error {
	if err := in.Validate(create); err != nil {
		return err
	}
	if in.Contacts != nil {
		return practice.Invalid("contacts", "Karbon keeps a client's contacts as Karbon contacts of their own; add them in Karbon.")
	}
	return nil
}

// ownerKey checks that a usr_ id is a Karbon user and returns its key,
// which Karbon accepts wherever it takes a user.
func (a *Adapter) ownerKey(ctx context.Context, owner string) (string, error) {
	key, ok := parseKey(owner, "usr_")
	if !ok {
		return "", practice.Invalid("owner", "The owner must be a person's id, such as usr_2bYxtn94ZSdY.")
	}
	dir, err := a.directory(ctx)
	if err != nil {
		return "", err
	}
	if dir.email(key) == "" {
		return "", practice.Invalid("owner", "There is no person %s in this firm's Karbon.", owner)
	}
	return key, nil
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
func newCard(in practice.ClientInput) map[string]any {
	if in.Email == nil && in.Phone == nil && in.Country == nil {
		return nil
	}
	return editCard(map[string]any{"IsPrimaryCard": true}, in)
}

func editCards(cards []any, in practice.ClientInput) []any {
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
func editCard(card map[string]any, in practice.ClientInput) map[string]any {
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
