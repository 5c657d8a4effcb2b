package readmodelsim

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/stamps"
)

// Vendor is a firm's system as the sync sees it through an adapter: it
// lists by offset, a small page at a time, so that a record created or
// deleted during a walk shifts every later page (Karbon's $skip); it
// reads one record; it lists clients by modification time but not jobs
// (Karbon keeps no modification time on work items). Invoices are
// listed as Karbon's billing lists them: a full pass in creation order,
// what changed since a time most recently updated first and ending at
// the first one updated before it, so that an invoice updated during a
// walk moves to the front and shifts the rest back. Every call lets the
// scheduler run other events after the answer is read and before it is
// returned, so that answers arrive stale.
type Vendor struct {
	now      func() time.Time
	pageSize int
	kinds    map[practice.Kind]map[string]Record
	version  int64
	// created orders each record by its creation.
	created map[string]int64
	// gone is when each record was deleted, for a change data capture
	// feed to report.
	gone map[practice.Kind]map[string]time.Time
	// Between runs after each call's answer is read.
	Between func()
	// Fail, when it returns an error, fails the call (an outage).
	Fail func() error
	// Calls counts the calls made.
	Calls int
}

// Record is one vendor record.
type Record struct {
	Kind    practice.Kind
	ID      string
	Name    string
	Version int64
	Updated time.Time
	// State is a proposal's state as its vendor words it (DRAFT, SENT,
	// ACCEPTED, ...); other kinds have none.
	State string
}

// JSON is the record in /v1 shape, as an adapter would give it.
func (r Record) JSON() json.RawMessage {
	obj := map[practice.Kind]string{practice.Clients: "client", practice.Jobs: "job", practice.Invoices: "invoice",
		practice.Engagements: "engagement"}[r.Kind]
	fields := map[string]any{"id": r.ID, "object": obj, "name": r.Name, "version": r.Version,
		"updated_at": r.Updated.UTC().Format(time.RFC3339Nano)}
	if r.State != "" {
		fields["state"] = r.State
	}
	b, _ := json.Marshal(fields)
	return b
}

// NewVendor makes an empty vendor on the clock now.
func NewVendor(now func() time.Time, pageSize int) *Vendor {
	return &Vendor{now: now, pageSize: pageSize, created: map[string]int64{}, kinds: map[practice.Kind]map[string]Record{
		practice.Clients: {}, practice.Jobs: {}, practice.Invoices: {}, practice.Engagements: {},
	}, gone: map[practice.Kind]map[string]time.Time{}}
}

// Put creates or changes a record, stamping a new version.
func (v *Vendor) Put(k practice.Kind, id, name string) Record {
	return v.PutState(k, id, name, v.kinds[k][id].State)
}

// PutState is Put of a proposal in state.
func (v *Vendor) PutState(k practice.Kind, id, name, state string) Record {
	v.version++
	r := Record{Kind: k, ID: id, Name: name, Version: v.version, Updated: v.now(), State: state}
	if _, ok := v.kinds[k][id]; !ok {
		v.created[string(k)+"/"+id] = v.version
	}
	v.kinds[k][id] = r
	return r
}

// Delete removes a record.
func (v *Vendor) Delete(k practice.Kind, id string) {
	delete(v.kinds[k], id)
	if v.gone[k] == nil {
		v.gone[k] = map[string]time.Time{}
	}
	v.gone[k][id] = v.now()
}

// Records are k's records now, by id.
func (v *Vendor) Records(k practice.Kind) map[string]Record { return v.kinds[k] }

// IDs are k's ids in the vendor's listing order.
func (v *Vendor) IDs(k practice.Kind) []string {
	ids := make([]string, 0, len(v.kinds[k]))
	for id := range v.kinds[k] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (v *Vendor) call() error {
	v.Calls++
	if v.Fail != nil {
		return v.Fail()
	}
	return nil
}

func (v *Vendor) between() {
	if v.Between != nil {
		v.Between()
	}
}

// List implements practice.Reader: a page at an offset; Next is the
// offset after it.
func (v *Vendor) List(ctx context.Context, _ practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	if err := v.call(); err != nil {
		return practice.Page{}, err
	}
	if _, ok := v.kinds[k]; !ok {
		return practice.Page{}, fmt.Errorf("no %s: %w", k, practice.ErrNotFound)
	}
	skip := 0
	if q.Cursor != "" {
		n, err := strconv.Atoi(q.Cursor)
		if err != nil {
			return practice.Page{}, &practice.InvalidError{Code: "invalid_cursor", Param: "cursor", Message: "not an offset"}
		}
		skip = n
	}
	var all []json.RawMessage
	for _, r := range v.listed(k, q.Filter.UpdatedSince) {
		all = append(all, r.JSON())
	}
	page := practice.Page{Items: []json.RawMessage{}}
	if skip < len(all) {
		end := min(skip+v.pageSize, len(all))
		page.Items = all[skip:end]
		if end < len(all) {
			page.HasMore, page.Next = true, strconv.Itoa(end)
		}
	}
	v.between()
	return page, ctx.Err()
}

// Get implements practice.Reader.
func (v *Vendor) Get(ctx context.Context, _ practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	if err := v.call(); err != nil {
		return nil, err
	}
	r, ok := v.kinds[k][id]
	v.between()
	if !ok {
		return nil, fmt.Errorf("%s %s: %w", k.Singular(), id, practice.ErrNotFound)
	}
	return r.JSON(), ctx.Err()
}

// listed are k's records changed since since (all of them when zero) in
// the order the vendor lists them.
func (v *Vendor) listed(k practice.Kind, since time.Time) []Record {
	var out []Record
	if k != practice.Invoices {
		for _, id := range v.IDs(k) {
			if r := v.kinds[k][id]; since.IsZero() || !r.Updated.Before(since) {
				out = append(out, r)
			}
		}
		return out
	}
	for _, r := range v.kinds[k] {
		out = append(out, r)
	}
	if since.IsZero() {
		slices.SortFunc(out, func(a, b Record) int {
			return cmp.Compare(v.created[string(k)+"/"+a.ID], v.created[string(k)+"/"+b.ID])
		})
		return out
	}
	slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(b.Version, a.Version) })
	for i, r := range out {
		if r.Updated.Before(since) {
			// Every invoice after this one was updated earlier still.
			return out[:i]
		}
	}
	return out
}

// Incremental implements readmodel.Incremental: clients, invoices and
// proposals (Xero's quotes, with If-Modified-Since) are listed by
// modification time, jobs are not.
func (v *Vendor) Incremental(k practice.Kind) bool {
	return k == practice.Clients || k == practice.Invoices || k == practice.Engagements
}

// Proposals is how an adapter makes a vendor's proposal the contract's
// engagement, given the upstream state store it remembers signings in.
type Proposals func(ctx context.Context, state changes.StateStore, r Record) (json.RawMessage, error)

// quotes reads the vendor as an adapter of a system that keeps proposals
// does: its proposals as engagements, through the mapping, which
// remembers in state when each was first seen accepted.
type quotes struct {
	*Vendor
	state   changes.StateStore
	mapping Proposals
}

func (q quotes) List(ctx context.Context, t practice.Tenant, k practice.Kind, query practice.Query) (practice.Page, error) {
	page, err := q.Vendor.List(ctx, t, k, query)
	if err != nil || k != practice.Engagements {
		return page, err
	}
	items := make([]json.RawMessage, len(page.Items))
	for i, raw := range page.Items {
		if items[i], err = q.engagement(ctx, raw); err != nil {
			return practice.Page{}, err
		}
	}
	page.Items = items
	return page, nil
}

func (q quotes) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	raw, err := q.Vendor.Get(ctx, t, k, id)
	if err != nil || k != practice.Engagements {
		return raw, err
	}
	return q.engagement(ctx, raw)
}

// engagement maps a proposal the vendor answered: the state it had when
// read, not the vendor's state now.
func (q quotes) engagement(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
	var r struct {
		ID, Name, State string
		Version         int64
		Updated         time.Time `json:"updated_at"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	return q.mapping(ctx, q.state, Record{Kind: practice.Engagements, ID: r.ID, Name: r.Name, Version: r.Version,
		Updated: r.Updated, State: r.State})
}

var _ practice.Reader = (*Vendor)(nil)

// CDC is a vendor whose adapter follows its change data capture, as
// QuickBooks Online's does: a position is a time, and each call answers
// the records of Kind changed and deleted since a little before it
// (Overlap), as they are now; a position older than LookBack, or an
// answer of Cap objects or more (which cannot be paged), is
// practice.ErrFeedExpired and the sync reconciles. It replaces polling.
type CDC struct {
	*Vendor
	Kind              practice.Kind
	LookBack, Overlap time.Duration
	Cap               int
}

// Changes implements readmodel.ChangeFeed.
func (c CDC) Changes(ctx context.Context, _ practice.Tenant, cursor string) (practice.ChangesPage, error) {
	return c.changes(ctx, cursor, nil)
}

// estimates reads a QuickBooks company as its adapter does when its
// estimates are the firm's engagements: invoices through CDC, estimates
// through the proposals' mapping, and one change data capture call
// answering both, the estimates as the page's Others.
type estimates struct {
	CDC
	quotes quotes
}

func (e estimates) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	if k == practice.Engagements {
		return e.quotes.List(ctx, t, k, q)
	}
	return e.CDC.List(ctx, t, k, q)
}

func (e estimates) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	if k == practice.Engagements {
		return e.quotes.Get(ctx, t, k, id)
	}
	return e.CDC.Get(ctx, t, k, id)
}

func (e estimates) Changes(ctx context.Context, _ practice.Tenant, cursor string) (practice.ChangesPage, error) {
	return e.CDC.changes(ctx, cursor, &e.quotes)
}

// changes answers a CDC call: c.Kind's changes, and the engagements'
// through proposals when it is set.
func (c CDC) changes(ctx context.Context, cursor string, proposals *quotes) (practice.ChangesPage, error) {
	now := c.now()
	if cursor == "" {
		return practice.ChangesPage{Next: now.Format(time.RFC3339Nano)}, nil
	}
	since, err := time.Parse(time.RFC3339Nano, cursor)
	if err != nil || now.Sub(since) > c.LookBack {
		return practice.ChangesPage{}, fmt.Errorf("position %q: %w", cursor, practice.ErrFeedExpired)
	}
	if err := c.call(); err != nil {
		return practice.ChangesPage{}, err
	}
	from := since.Add(-c.Overlap)
	page := practice.ChangesPage{Next: now.Format(time.RFC3339Nano)}
	for _, id := range c.IDs(c.Kind) {
		if r := c.kinds[c.Kind][id]; !r.Updated.Before(from) {
			page.Changed = append(page.Changed, r.JSON())
		}
	}
	for id, at := range c.gone[c.Kind] {
		if !at.Before(from) {
			page.Gone = append(page.Gone, id)
		}
	}
	slices.Sort(page.Gone)
	objects := len(page.Changed) + len(page.Gone)
	if proposals != nil {
		// Read with the invoices, as they are now: mapped before the
		// answer arrives, as the adapter maps the answer it has.
		o := practice.KindChanges{Kind: practice.Engagements}
		for _, id := range c.IDs(practice.Engagements) {
			if r := c.kinds[practice.Engagements][id]; !r.Updated.Before(from) {
				raw, err := proposals.engagement(ctx, r.JSON())
				if err != nil {
					return practice.ChangesPage{}, err
				}
				o.Changed = append(o.Changed, raw)
			}
		}
		for id, at := range c.gone[practice.Engagements] {
			if !at.Before(from) {
				o.Gone = append(o.Gone, id)
			}
		}
		slices.Sort(o.Gone)
		objects += len(o.Changed) + len(o.Gone)
		page.Others = append(page.Others, o)
	}
	c.between()
	if objects >= c.Cap {
		return practice.ChangesPage{}, fmt.Errorf("%d changes since %s: %w", objects, from, practice.ErrFeedExpired)
	}
	return page, ctx.Err()
}

// stamping reads the vendor as the adapter of a system that publishes no
// modification time on its jobs does (Karbon's work items): each job read
// is stamped (practice/stamps) in the upstream state store the instances
// share, its version and updated_at the stamp's, and the read's start
// orders it after a stamp made by a read begun later.
type stamping struct {
	*Vendor
	stamps *stamps.Store
}

// unstamped is a job as the vendor gives it, less the times it does not
// publish.
func unstamped(raw json.RawMessage) (map[string]any, error) {
	var r map[string]any
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	delete(r, "version")
	delete(r, "updated_at")
	return r, nil
}

func (s stamping) stamp(ctx context.Context, raw json.RawMessage, began time.Time) (json.RawMessage, error) {
	r, err := unstamped(raw)
	if err != nil {
		return nil, err
	}
	id, _ := r["id"].(string)
	st, err := s.stamps.Of(ctx, stamps.Read{Kind: practice.Jobs, ID: id, Content: r, Began: began})
	if err != nil {
		return nil, err
	}
	r["version"], r["updated_at"] = st.Version(), st.At.UTC().Format(time.RFC3339Nano)
	return json.Marshal(r)
}

func (s stamping) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	began := s.now()
	page, err := s.Vendor.List(ctx, t, k, q)
	if err != nil || k != practice.Jobs {
		return page, err
	}
	items := make([]json.RawMessage, len(page.Items))
	for i, raw := range page.Items {
		if items[i], err = s.stamp(ctx, raw, began); err != nil {
			return practice.Page{}, err
		}
	}
	page.Items = items
	return page, nil
}

func (s stamping) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	began := s.now()
	raw, err := s.Vendor.Get(ctx, t, k, id)
	if err != nil || k != practice.Jobs {
		return raw, err
	}
	return s.stamp(ctx, raw, began)
}

var _ practice.Reader = stamping{}
