package xpm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

// listClients walks client.api/list, which XPM does not page: with
// updated_since it asks only for the clients modified since then.
func (a *Adapter) listClients(ctx context.Context, f practice.Filter, cur paging.Cursor, limit int) (practice.Page, error) {
	w := paging.Walk[client]{
		Fetch: func(ctx context.Context, _, token string) (paging.VendorPage[client], error) {
			if token != "" {
				return paging.VendorPage[client]{}, errInvalidCursor
			}
			cs, err := a.fetchClients(ctx, f.UpdatedSince)
			return paging.VendorPage[client]{Items: cs}, err
		},
		ID: func(c client) string { return c.UUID },
		Match: func(c client) bool {
			return (f.Owner == "" || a.clientOwner(&c) == f.Owner) && (f.Status == "" || clientStatus(&c) == f.Status)
		},
		Convert: records(practice.Clients, func(c *client) string { return idOf("cli_", c.UUID) }, a.clientRecord, func(rec *practice.Client) bool {
			return after(rec.UpdatedAt, f.UpdatedSince) && after(rec.LastActivityAt, f.LastActivityAfter) &&
				(f.LastActivityBefore.IsZero() || !rec.LastActivityAt.After(f.LastActivityBefore))
		}),
		MaxPages: a.cfg.MaxScanPages,
	}
	return w.Collect(ctx, paging.Frame{}, cur, limit)
}

// after reports whether t is at or after since; a zero since is no bound.
func after(t, since time.Time) bool { return since.IsZero() || !t.Before(since) }

// records converts a page of XPM's items of kind k to /v1 records,
// leaving out those keep refuses: filters on the times the adapter keeps
// itself, which XPM cannot apply. An item that cannot be read is its
// record's alone (id is its /v1 id, "" when even that cannot be read).
func records[T, R any](k practice.Kind, id func(*T) string, record func(context.Context, *T) (R, error), keep func(*R) bool) func(context.Context, []paging.Found[T]) ([]json.RawMessage, error) {
	return func(ctx context.Context, items []paging.Found[T]) ([]json.RawMessage, error) {
		return paging.Each(ctx, 1, len(items), func(ctx context.Context, i int) (json.RawMessage, error) {
			rec, err := record(ctx, &items[i].Item)
			if err != nil {
				if id := id(&items[i].Item); id != "" {
					return nil, practice.Unusable(k, id, "the "+k.Singular(), err)
				}
				return nil, err
			}
			if !keep(&rec) {
				return nil, nil
			}
			return practice.Marshal(&rec)
		})
	}
}

// xpmKey is XPM's uuid or number as the /v1 id's part, "" when it is not
// one XPM writes.
var xpmKey = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

// idOf is the /v1 id of prefix and XPM's key, "" when the key is not one.
func idOf(prefix, key string) string {
	if !xpmKey.MatchString(key) {
		return ""
	}
	return prefix + key
}

// fetchClients reads every client, or those XPM says were modified since
// a time, in uuid order; deleted clients are left out.
func (a *Adapter) fetchClients(ctx context.Context, since time.Time) ([]client, error) {
	q := url.Values{}
	if !since.IsZero() {
		// XPM reads the time in the practice's zone, to the second.
		from := since.Add(-time.Duration(a.cfg.ModifiedOverlap)).In(a.loc)
		q.Set("modifiedSince", from.Format("2006-01-02T15:04:05"))
	}
	var l clientList
	if err := a.read(ctx, "/v3.1/client.api/list", q, "clients", &l); err != nil {
		return nil, err
	}
	out := l.Clients[:0]
	for _, c := range l.Clients {
		if !yes(c.IsDeleted) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(x, y client) int { return strings.Compare(x.UUID, y.UUID) })
	return out, nil
}

func (a *Adapter) getClient(ctx context.Context, uuid string) (json.RawMessage, error) {
	c, err := a.readClient(ctx, uuid)
	if err != nil {
		return nil, err
	}
	rec, err := a.clientRecord(ctx, c)
	if err != nil {
		return nil, err
	}
	return practice.Marshal(&rec)
}

func (a *Adapter) readClient(ctx context.Context, uuid string) (*client, error) {
	var one clientOne
	if err := a.read(ctx, "/v3.1/client.api/get/"+url.PathEscape(uuid), nil, "client", &one); err != nil {
		return nil, err
	}
	if one.Client == nil || yes(one.Client.IsDeleted) {
		return nil, notFound(practice.Clients, "cli_"+uuid)
	}
	return one.Client, nil
}

// clientRecord translates a client and stamps it.
func (a *Adapter) clientRecord(ctx context.Context, c *client) (practice.Client, error) {
	if !uuidRE.MatchString(c.UUID) {
		return practice.Client{}, upstream.Malformed(a.c.Label(), "client", fmt.Errorf("uuid %q", c.UUID))
	}
	rec := practice.Client{
		ID: "cli_" + c.UUID, Object: "client", Name: clientName(c), Type: a.clientType(c), Status: clientStatus(c),
		Owner: practice.Known(a.clientOwner(c)), Email: c.Email, Phone: c.Phone, Country: a.country(c.Country, c.PostalCountry),
		Contacts: []practice.Contact{},
	}
	for _, ct := range c.Contacts {
		if yes(ct.IsDeleted) {
			continue
		}
		phone := ct.Phone
		if phone == "" {
			phone = ct.Mobile
		}
		rec.Contacts = append(rec.Contacts, practice.Contact{Name: ct.Name, Role: contactRole(&ct), Email: ct.Email, Phone: phone})
	}
	st, err := a.stamps.Of(ctx, stamps.Read{Kind: practice.Clients, ID: rec.ID, Content: &rec})
	if err != nil {
		return practice.Client{}, err
	}
	// XPM publishes no creation time on a client: created_at is null.
	rec.UpdatedAt, rec.LastActivityAt, rec.Version = st.At, st.At, practice.VersionAt(st.At)
	return rec, nil
}

func clientName(c *client) string {
	if c.Name != "" {
		return c.Name
	}
	return strings.TrimSpace(c.FirstName + " " + c.LastName)
}

func clientStatus(c *client) string {
	switch {
	case yes(c.IsArchived):
		return "archived"
	case yes(c.IsProspect):
		return "prospect"
	}
	return "active"
}

// clientOwner is the account manager, else the job manager.
func (a *Adapter) clientOwner(c *client) string {
	for _, p := range []*party{c.AccountManager, c.JobManager} {
		if p != nil && p.UUID != "" {
			return "usr_" + p.UUID
		}
	}
	return ""
}

// structures maps words of XPM's business structure to client types,
// most specific first.
var structures = []struct{ word, typ string }{
	{"charit", "charity"}, {"trust", "trust"}, {"partnership", "partnership"}, {"llp", "partnership"},
	{"sole trader", "individual"}, {"individual", "individual"}, {"company", "company"}, {"limited", "company"},
	{"ltd", "company"}, {"plc", "company"}, {"corporation", "company"},
}

func (a *Adapter) clientType(c *client) string {
	s := strings.ToLower(c.BusinessStructure)
	for _, st := range structures {
		if s != "" && strings.Contains(s, st.word) {
			return st.typ
		}
	}
	if c.FirstName != "" || c.LastName != "" {
		return "individual"
	}
	return "company"
}

// structureOf is the business structure a client type writes.
func structureOf(typ string) string {
	return map[string]string{"individual": "Individual", "company": "Company", "partnership": "Partnership",
		"trust": "Trust", "charity": "Charity"}[typ]
}

func contactRole(ct *contact) string {
	switch {
	case ct.Position != "":
		return ct.Position
	case yes(ct.IsPrimary):
		return "primary contact"
	}
	return "contact"
}

// countries are the names XPM addresses give countries, as codes.
var countries = map[string]string{
	"united kingdom": "GB", "uk": "GB", "great britain": "GB", "england": "GB", "scotland": "GB", "wales": "GB",
	"northern ireland": "GB", "ireland": "IE", "republic of ireland": "IE", "united states": "US",
	"united states of america": "US", "usa": "US", "australia": "AU", "new zealand": "NZ", "canada": "CA",
	"south africa": "ZA", "france": "FR", "germany": "DE", "netherlands": "NL", "spain": "ES",
	"singapore": "SG", "hong kong": "HK",
}

// countryNames are the names written for codes.
var countryNames = map[string]string{"GB": "United Kingdom", "IE": "Ireland", "US": "United States",
	"AU": "Australia", "NZ": "New Zealand", "CA": "Canada", "ZA": "South Africa", "FR": "France",
	"DE": "Germany", "NL": "Netherlands", "ES": "Spain", "SG": "Singapore", "HK": "Hong Kong"}

func (a *Adapter) country(names ...string) string {
	for _, n := range names {
		n = strings.TrimSpace(n)
		if code, ok := countries[norm(n)]; ok {
			return code
		}
		if len(n) == 2 {
			return strings.ToUpper(n)
		}
	}
	return a.cfg.DefaultCountry
}
