package xpm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

// List returns one page of clients, jobs, people, invoices or engagements
// (quotes); other kinds
// are empty.
func (a *Adapter) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	if !a.serves(t) {
		return practice.Page{}, fmt.Errorf("xpm: no records for %s: %w", t, practice.ErrNotFound)
	}
	cur, err := paging.DecodeCursor(q.Cursor)
	if err != nil {
		return practice.Page{}, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	switch k {
	case practice.Clients:
		return a.listClients(ctx, q.Filter, cur, limit)
	case practice.Jobs:
		return a.listJobs(ctx, q.Filter, cur, limit)
	case practice.People:
		return a.listPeople(ctx, q.Filter, cur, limit)
	case practice.Invoices:
		return a.listInvoices(ctx, q.Filter, cur, limit)
	case practice.Engagements:
		return a.listQuotes(ctx, q.Filter, cur, limit)
	}
	return practice.Page{Items: []json.RawMessage{}}, nil
}

// listPeople walks staff.api/list, which XPM does not page.
func (a *Adapter) listPeople(ctx context.Context, f practice.Filter, cur paging.Cursor, limit int) (practice.Page, error) {
	w := paging.Walk[staff]{
		Fetch: func(ctx context.Context, _, token string) (paging.VendorPage[staff], error) {
			if token != "" {
				return paging.VendorPage[staff]{}, errInvalidCursor
			}
			var l staffList
			if err := a.read(ctx, "/v3.1/staff.api/list", nil, "staff", &l); err != nil {
				return paging.VendorPage[staff]{}, err
			}
			slices.SortFunc(l.StaffList, func(x, y staff) int { return strings.Compare(x.UUID, y.UUID) })
			return paging.VendorPage[staff]{Items: l.StaffList}, nil
		},
		ID: func(s staff) string { return s.UUID },
		Convert: records(practice.People, func(s *staff) string { return idOf("usr_", s.UUID) }, a.person,
			func(p *practice.Person) bool { return after(p.UpdatedAt, f.UpdatedSince) }),
		MaxPages: a.cfg.MaxScanPages,
	}
	return w.Collect(ctx, paging.Frame{}, cur, limit)
}

func (a *Adapter) getPerson(ctx context.Context, uuid string) (json.RawMessage, error) {
	var one staffOne
	if err := a.read(ctx, "/v3.1/staff.api/get/"+url.PathEscape(uuid), nil, "staff member", &one); err != nil {
		return nil, err
	}
	if one.Staff == nil {
		return nil, notFound(practice.People, "usr_"+uuid)
	}
	p, err := a.person(ctx, one.Staff)
	if err != nil {
		return nil, err
	}
	return practice.Marshal(&p)
}

// person translates a staff member. XPM's staff list holds the staff who
// can sign in; it names no role.
func (a *Adapter) person(ctx context.Context, s *staff) (practice.Person, error) {
	if !uuidRE.MatchString(s.UUID) {
		return practice.Person{}, upstream.Malformed(a.c.Label(), "staff member", fmt.Errorf("uuid %q", s.UUID))
	}
	p := practice.Person{ID: "usr_" + s.UUID, Object: "person", Name: s.Name, Email: practice.Known(s.Email), Role: "staff", Active: true}
	st, err := a.stamps.Of(ctx, stamps.Read{Kind: practice.People, ID: p.ID, Content: &p})
	if err != nil {
		return practice.Person{}, err
	}
	// XPM publishes no creation time on a staff member: created_at is
	// null.
	p.UpdatedAt, p.Version = st.At, practice.VersionAt(st.At)
	return p, nil
}
