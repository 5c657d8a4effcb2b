package karbon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

var defaultClientStatuses = map[string]string{
	"client":          "active",
	"prospect":        "prospect",
	"former client":   "inactive",
	"inactive client": "inactive",
	"past client":     "inactive",
	"archived":        "archived",
}

func clientStatuses(cfg map[string]string) (map[string]string, error) {
	m := map[string]string{}
	for k, v := range defaultClientStatuses {
		m[k] = v
	}
	for k, v := range cfg {
		if !contains(practice.ClientStatuses, v) {
			return nil, fmt.Errorf("karbon: client_statuses %q: %q is not one of %v", k, v, practice.ClientStatuses)
		}
		m[norm(k)] = v
	}
	return m, nil
}

// statusOf maps a contact type to a client status; false means the contact
// is not a client at all.
func (a *Adapter) statusOf(contactType string) (string, bool) {
	t := norm(contactType)
	if s, ok := a.statuses[t]; ok {
		return s, true
	}
	if strings.Contains(t, "client") {
		return "active", true
	}
	return "", false
}

// statusFor is the contact type a write of status sets: the first
// configured type for it, else the default's.
func (a *Adapter) statusFor(status string) string {
	for k, v := range a.cfg.ClientStatuses {
		if v == status {
			return k
		}
	}
	switch status {
	case "active":
		return "Client"
	case "prospect":
		return "Prospect"
	case "inactive":
		return "Former Client"
	}
	return "Archived"
}

// clientRow is one entry of Karbon's contact, organization or client group
// lists.
type clientRow struct {
	ref         clientRef
	name        string // FullName, by which other systems name the client
	contactType string // empty for client groups, whose list has none
	version     string // LastModifiedDateTime as Karbon wrote it
	modified    time.Time
}

func (a *Adapter) listClients(ctx context.Context, f practice.Filter, cur paging.Cursor, limit int) (practice.Page, error) {
	// Both filters compare LastModifiedDateTime, so the later of the two
	// is where a read newest first may stop.
	since := f.UpdatedSince
	if f.LastActivityAfter.After(since) {
		since = f.LastActivityAfter
	}
	w := paging.Walk[clientRow]{
		Fetch: func(ctx context.Context, _, token string) (paging.VendorPage[clientRow], error) {
			return a.fetchClients(ctx, since, token)
		},
		ID: func(r clientRow) string { return r.ref.id() },
		Match: func(r clientRow) bool {
			if r.ref.kind != 'g' {
				status, ok := a.statusOf(r.contactType)
				if !ok || f.Status != "" && status != f.Status {
					return false
				}
			}
			return inTimes(f, r.modified)
		},
		Convert: func(ctx context.Context, rows []paging.Found[clientRow]) ([]json.RawMessage, error) {
			return paging.Each(ctx, a.cfg.DetailConcurrency, len(rows), func(ctx context.Context, i int) (json.RawMessage, error) {
				r := rows[i].Item
				c, ok := a.details.get(r.ref.id(), r.version)
				if !ok {
					var err error
					if c, ok, err = a.readClient(ctx, r.ref); err != nil || !ok {
						// Listed, but its own record cannot be read:
						// the client's alone.
						return nil, practice.Unusable(practice.Clients, r.ref.id(), "the client's record", err)
					}
				}
				if (f.Owner == "" || c.owner == f.Owner) && (f.Status == "" || c.status == f.Status) {
					return c.raw, nil
				}
				return nil, nil
			})
		},
		MaxPages: a.cfg.MaxScanPages,
	}
	return w.Collect(ctx, paging.Frame{}, cur, limit)
}

// inTimes applies the time filters of clients, which Karbon's $filter
// cannot express, to the modified time (also their last activity).
func inTimes(f practice.Filter, t time.Time) bool {
	return (f.UpdatedSince.IsZero() || !t.Before(f.UpdatedSince)) &&
		(f.LastActivityAfter.IsZero() || !t.Before(f.LastActivityAfter)) &&
		(f.LastActivityBefore.IsZero() || !t.After(f.LastActivityBefore))
}

// newestFirst is the order Karbon publishes for contacts and organizations
// (not client groups, whose $orderby names FullName alone) that lets a
// read of what changed since a time end at the first row modified before
// it: a poll that finds nothing changed costs one page of each.
const newestFirst = "LastModifiedDateTime desc"

// fetchClients reads one Karbon page of a client list. Tokens are
// "<collection letter>:<page token>" (see odataPage); "" is the first page
// of contacts, then organizations, then client groups. With since set,
// contacts and organizations are read newest first and each ends at its
// first row modified before since; rows of client groups all come, to be
// filtered by the caller. Whether a page is newest first is read from its
// link, so a cursor issued in either order resumes in it.
func (a *Adapter) fetchClients(ctx context.Context, since time.Time, token string) (paging.VendorPage[clientRow], error) {
	var page paging.VendorPage[clientRow]
	seg, at := byte('c'), ""
	if token != "" {
		s, t, ok := strings.Cut(token, ":")
		if !ok || len(s) != 1 || strings.IndexByte("cog", s[0]) < 0 {
			return page, errBadCursor()
		}
		seg, at = s[0], t
	}
	path := "/v3/" + clientRef{kind: seg}.collection()
	var q url.Values
	newest := false
	if seg != 'g' && !since.IsZero() {
		_, first, err := pageLink(path, at)
		if err != nil {
			return page, err
		}
		if first {
			q = url.Values{"$orderby": {newestFirst}}
		}
		newest = first || linkOrder(at) == newestFirst
	}
	top := a.cfg.PageSize
	var next string
	var err error
	switch seg {
	case 'c':
		var items []contactSummary
		items, next, err = odataPage[contactSummary](ctx, a, path, "contacts", q, at, top)
		for _, v := range items {
			page.Items = append(page.Items, clientRow{ref: clientRef{'c', v.ContactKey}, name: v.FullName, contactType: v.ContactType, version: v.LastModifiedDateTime})
		}
	case 'o':
		var items []organizationSummary
		items, next, err = odataPage[organizationSummary](ctx, a, path, "organizations", q, at, top)
		for _, v := range items {
			page.Items = append(page.Items, clientRow{ref: clientRef{'o', v.OrganizationKey}, name: v.FullName, contactType: v.ContactType, version: v.LastModifiedDateTime})
		}
	default:
		var items []clientGroupSummary
		items, next, err = odataPage[clientGroupSummary](ctx, a, path, "client groups", q, at, top)
		for _, v := range items {
			page.Items = append(page.Items, clientRow{ref: clientRef{'g', v.ClientGroupKey}, name: v.FullName, version: v.LastModifiedDateTime})
		}
	}
	if err != nil {
		return page, err
	}
	for i := range page.Items {
		r := &page.Items[i]
		if !validKey(r.ref.key) {
			return page, upstream.Malformed(a.c.Label(), "client list", fmt.Errorf("key %q", r.ref.key))
		}
		t, err := karbonTime(r.version)
		if err != nil {
			return page, upstream.Malformed(a.c.Label(), "client list", err)
		}
		r.modified = t
	}
	if newest {
		for i, r := range page.Items {
			if r.modified.Before(since) {
				// Every row after this one is older still.
				page.Items, next = page.Items[:i], ""
				break
			}
		}
	}
	switch {
	case next != "":
		page.Next = string(seg) + ":" + next
	case seg == 'c':
		page.Next = "o:"
	case seg == 'o':
		page.Next = "g:"
	}
	return page, nil
}

// linkOrder is the $orderby of a page link, "" for none.
func linkOrder(link string) string {
	_, raw, _ := strings.Cut(link, "?")
	q, err := url.ParseQuery(raw)
	if err != nil {
		return ""
	}
	return q.Get("$orderby")
}

func (a *Adapter) getClient(ctx context.Context, ref clientRef) (json.RawMessage, error) {
	c, ok, err := a.readClient(ctx, ref)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, notFound(practice.Clients, ref.id())
	}
	return c.raw, nil
}

// readClient reads a client in full and keeps it in the detail cache; ok
// is false when the record exists but is not a client (a supplier).
func (a *Adapter) readClient(ctx context.Context, ref clientRef) (cached, bool, error) {
	path := "/v3/" + ref.collection() + "/" + url.PathEscape(ref.key)
	var (
		c       practice.Client
		version string
		ok      bool
		err     error
	)
	switch ref.kind {
	case 'c':
		var d contactDetail
		// Karbon publishes one expansion per read of a contact: its
		// business cards. The owner comes from ClientOwner, which names
		// the user without expanding the client team.
		if err = a.getJSON(ctx, path+"?$expand=BusinessCards", "contact", &d); err == nil {
			version = d.LastModifiedDateTime
			c, ok, err = a.fromContact(ctx, d)
		}
	case 'o':
		var d organizationDetail
		if err = a.getJSON(ctx, path+"?$expand=BusinessCards,ClientTeam,Contacts", "organization", &d); err == nil {
			version = d.LastModifiedDateTime
			c, ok, err = a.fromOrganization(ctx, d)
		}
	default:
		var d clientGroupDetail
		if err = a.getJSON(ctx, path+"?$expand=BusinessCard,ClientTeam", "client group", &d); err == nil {
			version = d.LastModifiedDateTime
			c, ok, err = a.fromClientGroup(ctx, d)
		}
	}
	if err != nil {
		return cached{}, false, fmt.Errorf("karbon: read client %s: %w", ref.id(), err)
	}
	if !ok {
		return cached{}, false, nil
	}
	raw, err := practice.Marshal(c)
	if err != nil {
		return cached{}, false, fmt.Errorf("karbon: encode client: %w", err)
	}
	e := cached{version: version, raw: raw, owner: practice.ValueOf(c.Owner), status: c.Status}
	a.details.put(ref.id(), e)
	return e, true, nil
}

func (a *Adapter) fromContact(ctx context.Context, d contactDetail) (practice.Client, bool, error) {
	status, ok := a.statusOf(d.ContactType)
	if !ok {
		return practice.Client{}, false, nil
	}
	name := strings.Join(strings.Fields(d.FirstName+" "+d.MiddleName+" "+d.LastName), " ")
	c, err := a.baseClient(ctx, clientRef{'c', d.ContactKey}, name, status, d.LastModifiedDateTime, d.ClientTeam, d.ClientOwner)
	if err != nil {
		return c, false, err
	}
	c.Type = "individual"
	card := primaryCard(d.BusinessCards)
	c.Email, c.Phone = cardEmail(card), cardPhone(card)
	c.Country = a.country(card, d.AccountingDetail)
	c.Contacts = []practice.Contact{{Name: name, Role: "primary", Email: c.Email, Phone: c.Phone}}
	return c, true, nil
}

func (a *Adapter) fromOrganization(ctx context.Context, d organizationDetail) (practice.Client, bool, error) {
	status, ok := a.statusOf(d.ContactType)
	if !ok {
		return practice.Client{}, false, nil
	}
	c, err := a.baseClient(ctx, clientRef{'o', d.OrganizationKey}, d.FullName, status, d.LastModifiedDateTime, d.ClientTeam, d.ClientOwner)
	if err != nil {
		return c, false, err
	}
	c.Type = "company"
	if d.AccountingDetail != nil {
		c.Type = entityClientType(d.AccountingDetail.EntityType)
	}
	card := primaryCard(d.BusinessCards)
	c.Email, c.Phone = cardEmail(card), cardPhone(card)
	c.Country = a.country(card, d.AccountingDetail)
	for _, p := range d.Contacts {
		role := strings.ToLower(strings.TrimSpace(p.RoleOrTitle))
		if role == "" {
			role = "contact"
		}
		c.Contacts = append(c.Contacts, practice.Contact{Name: p.FullName, Role: role, Email: p.EmailAddress, Phone: p.PhoneNumber})
	}
	return c, true, nil
}

func (a *Adapter) fromClientGroup(ctx context.Context, d clientGroupDetail) (practice.Client, bool, error) {
	status, ok := a.statusOf(d.ContactType)
	if !ok && d.ContactType != "" {
		return practice.Client{}, false, nil
	}
	if !ok {
		status = "active"
	}
	c, err := a.baseClient(ctx, clientRef{'g', d.ClientGroupKey}, d.FullName, status, d.LastModifiedDateTime, d.ClientTeam, d.ClientOwner)
	if err != nil {
		return c, false, err
	}
	c.Type = a.cfg.ClientGroupType
	c.Email, c.Phone = cardEmail(d.BusinessCard), cardPhone(d.BusinessCard)
	c.Country = a.country(d.BusinessCard, nil)
	if d.PrimaryContact != "" {
		c.Contacts = append(c.Contacts, practice.Contact{Name: d.PrimaryContact, Role: "primary"})
	}
	return c, true, nil
}

func (a *Adapter) baseClient(ctx context.Context, ref clientRef, name, status, modified string, team []teamMember, ownerField string) (practice.Client, error) {
	t, err := karbonTime(modified)
	if err != nil {
		return practice.Client{}, upstream.Malformed(a.c.Label(), "client", err)
	}
	owner := ""
	for _, m := range team {
		if m.RoleType == "ClientOwner" && m.MemberType == "User" && validKey(m.MemberKey) {
			owner = m.MemberKey
			break
		}
	}
	if owner == "" && ownerField != "" {
		// Without the client team, ClientOwner names the user by email
		// (or key); the directory turns that into a key.
		dir, err := a.directory(ctx)
		if err != nil {
			return practice.Client{}, err
		}
		owner = dir.key(ownerField)
	}
	// Karbon publishes no creation time on a contact, an organization
	// or a client group: created_at is null.
	return practice.Client{
		ID: ref.id(), Object: "client", Name: name, Status: status, Owner: practice.Known(userID(owner)),
		Contacts: []practice.Contact{}, LastActivityAt: t, UpdatedAt: t, Version: practice.VersionAt(t),
	}, nil
}

// entityClientType maps Karbon's accounting entity types to client types.
func entityClientType(entity string) string {
	switch entity {
	case "Partnership", "Limited Liability Partnership":
		return "partnership"
	case "Estate or Trust", "Pension Scheme":
		return "trust"
	case "Charitable Incorporated Organisation", "Exempt Organization", "Private Foundation", "Club or Society":
		return "charity"
	case "Person", "Sole Proprietor":
		return "individual"
	}
	return "company"
}

// clientEntityType is the reverse, for writes.
func clientEntityType(typ string) string {
	switch typ {
	case "partnership":
		return "Partnership"
	case "trust":
		return "Estate or Trust"
	case "charity":
		return "Charitable Incorporated Organisation"
	case "individual":
		return "Sole Proprietor"
	}
	return "Corporation"
}

func primaryCard(cards []businessCard) *businessCard {
	for i := range cards {
		if cards[i].IsPrimaryCard {
			return &cards[i]
		}
	}
	if len(cards) > 0 {
		return &cards[0]
	}
	return nil
}

func cardEmail(c *businessCard) string {
	if c == nil || len(c.EmailAddresses) == 0 {
		return ""
	}
	return c.EmailAddresses[0]
}

func cardPhone(c *businessCard) string {
	if c == nil || len(c.PhoneNumbers) == 0 {
		return ""
	}
	return c.PhoneNumbers[0].Number
}

// country is the client's ISO 3166 country: the card's address, its phone
// number's country, the tax country (Karbon writes the United Kingdom
// as UK), else the configured default.
func (a *Adapter) country(c *businessCard, acc *accountingDetail) string {
	var candidates []string
	if c != nil {
		for _, ad := range c.Addresses {
			candidates = append(candidates, ad.CountryCode)
		}
		for _, p := range c.PhoneNumbers {
			candidates = append(candidates, p.CountryCode)
		}
	}
	if acc != nil {
		candidates = append(candidates, acc.TaxCountryCode)
	}
	for _, cc := range candidates {
		cc = strings.ToUpper(strings.TrimSpace(cc))
		if cc == "UK" {
			cc = "GB"
		}
		if len(cc) == 2 {
			return cc
		}
	}
	return a.cfg.DefaultCountry
}
