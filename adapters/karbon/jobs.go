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
	"github.com/practicegw/practicegw/practice/stamps"
)

func (a *Adapter) listJobs(ctx context.Context, f practice.Filter, cur paging.Cursor, limit int) (practice.Page, error) {
	filter, none, err := a.jobFilter(ctx, f)
	if err != nil {
		return practice.Page{}, err
	}
	if none {
		return practice.Page{Items: []json.RawMessage{}}, nil
	}
	// When Karbon applies every filter, a page of ours is the next limit
	// work items, and one more says whether there are others: asking for
	// no more than that keeps the answer small. Filters applied here read
	// full Karbon pages.
	top := a.cfg.PageSize
	if f.Stage == "" && f.DeadlineAfter == "" && f.DeadlineBefore == "" && f.UpdatedSince.IsZero() {
		top = min(limit+1, top)
	}
	w := paging.Walk[workItem]{
		Fetch: func(ctx context.Context, _, token string) (paging.VendorPage[workItem], error) {
			return a.fetchWork(ctx, filter, token, top)
		},
		ID:    func(w workItem) string { return w.WorkItemKey },
		Match: func(w workItem) bool { return a.jobMatches(f, w) },
		Convert: func(ctx context.Context, ws []paging.Found[workItem]) ([]json.RawMessage, error) {
			return paging.Each(ctx, 1, len(ws), func(_ context.Context, i int) (json.RawMessage, error) {
				raw, err := a.jobJSON(ctx, ws[i].Item)
				if err == nil && !f.UpdatedSince.IsZero() && !updatedSince(raw, f.UpdatedSince) {
					return nil, nil
				}
				// A row that cannot be read is its work item's alone.
				return raw, practice.Unusable(practice.Jobs, "job_"+ws[i].Item.WorkItemKey, "the work item", err)
			})
		},
		MaxPages: a.cfg.MaxScanPages,
	}
	return w.Collect(ctx, paging.Frame{}, cur, limit)
}

// jobFilter is the part of f Karbon's $filter can take: the client, the
// assignee (by email) and the primary status when the stage occurs under
// one only. none reports a filter that matches nothing here (an owner who
// is not a Karbon user).
func (a *Adapter) jobFilter(ctx context.Context, f practice.Filter) (filter string, none bool, err error) {
	var clauses []string
	if f.Client != "" {
		ref, ok := parseClientID(f.Client)
		if !ok {
			return "", true, nil
		}
		clauses = append(clauses, "ClientKey eq "+odataString(ref.key))
	}
	if f.Owner != "" {
		key, ok := parseKey(f.Owner, "usr_")
		if !ok {
			return "", true, nil
		}
		dir, err := a.directory(ctx)
		if err != nil {
			return "", false, err
		}
		email := dir.email(key)
		if email == "" {
			return "", true, nil
		}
		clauses = append(clauses, "AssigneeEmailAddress eq "+odataString(email))
	}
	if f.Stage != "" {
		statuses, err := a.workStatuses(ctx)
		if err != nil {
			return "", false, err
		}
		switch ps := a.stages.Load().primariesFor(statuses, f.Stage); len(ps) {
		case 0:
			return "", true, nil
		case 1:
			clauses = append(clauses, "PrimaryStatus eq "+odataString(ps[0]))
		}
	}
	return strings.Join(clauses, " and "), false, nil
}

// jobMatches applies every job filter; the ones in $filter again, which
// costs nothing and keeps this the one definition of a match.
func (a *Adapter) jobMatches(f practice.Filter, w workItem) bool {
	if f.Stage != "" && a.stages.Load().stage(w.PrimaryStatus, w.SecondaryStatus, w.WorkStatus) != f.Stage {
		return false
	}
	if f.Owner != "" && userID(w.AssigneeKey) != f.Owner {
		return false
	}
	if f.Client != "" {
		ref, ok := refFromClientType(w.ClientType, w.ClientKey)
		if !ok || ref.id() != f.Client {
			return false
		}
	}
	if f.DeadlineAfter != "" || f.DeadlineBefore != "" {
		d, err := deadline(w)
		if err != nil || d == "" || f.DeadlineAfter != "" && d < f.DeadlineAfter || f.DeadlineBefore != "" && d > f.DeadlineBefore {
			return false
		}
	}
	// updated_since is the stamp's, which the conversion reads.
	return true
}

// fetchWork reads one page of work items: the first (top of them) or
// the one at Karbon's next link.
func (a *Adapter) fetchWork(ctx context.Context, filter, token string, top int) (paging.VendorPage[workItem], error) {
	var page paging.VendorPage[workItem]
	var q url.Values
	if filter != "" {
		q = url.Values{"$filter": {filter}}
	}
	began := a.clock.Now()
	items, next, err := odataPage[workItem](ctx, a, "/v3/WorkItems", "work items", q, token, top)
	if err != nil {
		return page, err
	}
	for i, w := range items {
		if !validKey(w.WorkItemKey) {
			return page, upstream.Malformed(a.c.Label(), "work items", fmt.Errorf("work item key %q", w.WorkItemKey))
		}
		items[i].read = began
	}
	page.Items, page.Next = items, next
	return page, nil
}

func (a *Adapter) getJob(ctx context.Context, key string) (json.RawMessage, error) {
	w, err := a.readWork(ctx, key)
	if err != nil {
		return nil, err
	}
	return a.jobJSON(ctx, w)
}

func (a *Adapter) readWork(ctx context.Context, key string) (workItem, error) {
	w := workItem{read: a.clock.Now()}
	if err := a.getJSON(ctx, "/v3/WorkItems/"+url.PathEscape(key), "work item", &w); err != nil {
		return w, fmt.Errorf("karbon: read work item %s: %w", key, err)
	}
	if w.WorkItemKey == "" {
		w.WorkItemKey = key
	}
	return w, nil
}

// job translates a work item. Karbon publishes no modification time on
// one (StartDate, DueDate, DeadlineDate and CompletedDate only), so its
// updated_at and version are the gateway's stamp: when a gateway first
// read it as it now is (practice/stamps).
func (a *Adapter) job(ctx context.Context, w workItem) (practice.Job, error) {
	created, completed, err := workTimes(w)
	if err != nil {
		return practice.Job{}, upstream.Malformed(a.c.Label(), "work item "+w.WorkItemKey, err)
	}
	d, err := deadline(w)
	if err != nil {
		return practice.Job{}, upstream.Malformed(a.c.Label(), "work item "+w.WorkItemKey, err)
	}
	j := practice.Job{
		ID: "job_" + w.WorkItemKey, Object: "job", Title: w.Title, Type: w.WorkType,
		Owner:    practice.Known(userID(w.AssigneeKey)),
		Stage:    a.stages.Load().stage(w.PrimaryStatus, w.SecondaryStatus, w.WorkStatus),
		Deadline: d,
	}
	if ref, ok := refFromClientType(w.ClientType, w.ClientKey); ok {
		j.Client = practice.Known(ref.id())
	}
	if practice.ClosedStage(j.Stage) && !completed.IsZero() {
		j.ClosedAt = &completed
	}
	// The version a work item carried before it was stamped was its
	// start or completion: its first stamp is after it.
	before := created
	if completed.After(before) {
		before = completed
	}
	st, err := a.stamps.Of(ctx, stamps.Read{Kind: practice.Jobs, ID: j.ID, Content: &j, Began: w.read, After: before})
	if err != nil {
		return practice.Job{}, err
	}
	if practice.ClosedStage(j.Stage) && j.ClosedAt == nil {
		closed := st.At
		j.ClosedAt = &closed
	}
	j.CreatedAt, j.UpdatedAt, j.Version = practice.KnownAt(created), st.At, st.Version()
	return j, nil
}

func (a *Adapter) jobJSON(ctx context.Context, w workItem) (json.RawMessage, error) {
	j, err := a.job(ctx, w)
	if err != nil {
		return nil, err
	}
	return practice.Marshal(&j)
}

// updatedSince reports whether a record's updated_at is not before since.
func updatedSince(raw json.RawMessage, since time.Time) bool {
	var v struct {
		UpdatedAt time.Time `json:"updated_at"`
	}
	return json.Unmarshal(raw, &v) == nil && !v.UpdatedAt.Before(since)
}

// workTimes are the only times a work item carries: it starts, and it may
// have completed.
func workTimes(w workItem) (started, completed time.Time, err error) {
	if started, err = karbonTime(w.StartDate); err != nil {
		return
	}
	completed, err = karbonTime(w.CompletedDate)
	return
}

// deadline is the external deadline, else the firm's own due date.
func deadline(w workItem) (string, error) {
	if w.DeadlineDate != "" {
		return karbonDate(w.DeadlineDate)
	}
	return karbonDate(w.DueDate)
}
