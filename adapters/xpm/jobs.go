package xpm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

var errInvalidCursor = &practice.InvalidError{Code: "invalid_cursor", Param: "cursor",
	Message: "The cursor is not one this collection issued; pass the next_cursor of the previous page."}

// Page tokens of the lists read one after another: "" the first, then
// draft invoices, then one year of job.api/list or invoice.api/list
// ("y:<from>-<to>", the dates as XPM takes them).
const (
	tokenDraft  = "draft"
	tokenWindow = "y:"
)

// firstWindow is the newest year of the history, ending today in the
// practice's zone.
func (a *Adapter) firstWindow() string {
	to := a.clock.Now().In(a.loc)
	return window(time.Date(to.Year(), to.Month(), to.Day(), 0, 0, 0, 0, time.UTC))
}

func window(to time.Time) string {
	from := to.AddDate(-1, 0, 1)
	return tokenWindow + from.Format("20060102") + "-" + to.Format("20060102")
}

// nextWindow is the year before w, "" once the history's years are read.
func (a *Adapter) nextWindow(w string, first string) (string, error) {
	from, _, err := parseWindow(w)
	if err != nil {
		return "", err
	}
	_, newest, err := parseWindow(first)
	if err != nil {
		return "", err
	}
	to := from.AddDate(0, 0, -1)
	if newest.Year()-to.Year() >= a.cfg.HistoryYears {
		return "", nil
	}
	return window(to), nil
}

func parseWindow(w string) (from, to time.Time, err error) {
	rest, ok := strings.CutPrefix(w, tokenWindow)
	f, t, ok2 := strings.Cut(rest, "-")
	if ok && ok2 {
		if from, err = time.Parse("20060102", f); err == nil {
			to, err = time.Parse("20060102", t)
		}
	}
	if !ok || !ok2 || err != nil || to.Before(from) || to.Sub(from) > 366*24*time.Hour {
		return time.Time{}, time.Time{}, errInvalidCursor
	}
	return from, to, nil
}

// listJobs walks the current jobs, then each year of job.api/list less
// the current ones; or a client's jobs alone.
func (a *Adapter) listJobs(ctx context.Context, f practice.Filter, cur paging.Cursor, limit int) (practice.Page, error) {
	clientUUID := ""
	if f.Client != "" {
		var ok bool
		if clientUUID, ok = parseID(practice.Clients, f.Client); !ok {
			return practice.Page{Items: []json.RawMessage{}}, nil
		}
	}
	s := &jobScan{a: a, client: clientUUID, first: a.firstWindow()}
	w := paging.Walk[job]{
		Fetch: s.fetch,
		ID:    func(j job) string { return j.ID },
		Match: func(j job) bool { return a.jobMatches(&j, f, clientUUID) },
		Convert: records(practice.Jobs, func(j *job) string { return idOf("job_", j.ID) }, a.jobRecord,
			func(rec *practice.Job) bool { return after(rec.UpdatedAt, f.UpdatedSince) }),
		MaxPages: a.cfg.MaxScanPages,
	}
	return w.Collect(ctx, paging.Frame{}, cur, limit)
}

// jobScan is the vendor side of one listJobs call.
type jobScan struct {
	a *Adapter
	// client is the UUID of the client whose jobs alone are listed, if
	// any.
	client string
	// first is the newest year's window, taken once a call: the current
	// jobs' page leads to it and the history's years count from it.
	first string
	// current holds the current jobs' numbers, once read in this call.
	current map[string]bool
}

// fetch reads the vendor page at token: a client's jobs all at once;
// otherwise the current jobs first, then the history a year at a time.
func (s *jobScan) fetch(ctx context.Context, _, token string) (paging.VendorPage[job], error) {
	var page paging.VendorPage[job]
	var err error
	switch {
	case s.client != "":
		if token != "" {
			return page, errInvalidCursor
		}
		page.Items, err = s.a.fetchJobs(ctx, "/v3.1/job.api/client/"+url.PathEscape(s.client), nil, "client's jobs")
		return page, err
	case token == "":
		page.Items, err = s.fetchCurrent(ctx)
		page.Next = s.first
		return page, err
	}
	return s.fetchWindow(ctx, token)
}

// fetchCurrent reads the current jobs and notes their numbers.
func (s *jobScan) fetchCurrent(ctx context.Context) ([]job, error) {
	js, err := s.a.fetchJobs(ctx, "/v3.1/job.api/current", nil, "current jobs")
	if err == nil {
		s.current = map[string]bool{}
		for _, j := range js {
			s.current[j.ID] = true
		}
	}
	return js, err
}

// fetchWindow reads one year of job.api/list, leaving out the current
// jobs: the first page listed them already. A call that starts from a
// cursor reads the current jobs again to know which they are.
func (s *jobScan) fetchWindow(ctx context.Context, token string) (paging.VendorPage[job], error) {
	var page paging.VendorPage[job]
	from, to, err := parseWindow(token)
	if err != nil {
		return page, err
	}
	if s.current == nil {
		if _, err := s.fetchCurrent(ctx); err != nil {
			return page, err
		}
	}
	q := url.Values{"from": {from.Format("20060102")}, "to": {to.Format("20060102")}}
	js, err := s.a.fetchJobs(ctx, "/v3.1/job.api/list", q, "jobs")
	if err != nil {
		return page, err
	}
	for _, j := range js {
		if !s.current[j.ID] {
			page.Items = append(page.Items, j)
		}
	}
	if page.Next, err = s.a.nextWindow(token, s.first); err != nil {
		return page, err
	}
	return page, nil
}

// jobMatches is the filter XPM's job lists cannot apply themselves.
func (a *Adapter) jobMatches(j *job, f practice.Filter, clientUUID string) bool {
	if f.Owner != "" && a.jobOwner(j) != f.Owner || f.Stage != "" && a.jobStage(j) != f.Stage {
		return false
	}
	if clientUUID != "" && (j.Client == nil || !strings.EqualFold(j.Client.UUID, clientUUID)) {
		return false
	}
	if f.DeadlineAfter != "" || f.DeadlineBefore != "" {
		d, err := xpmDate(j.DueDate)
		if err != nil || d == "" || f.DeadlineAfter != "" && d < f.DeadlineAfter || f.DeadlineBefore != "" && d > f.DeadlineBefore {
			return false
		}
	}
	return true
}

// fetchJobs reads one of XPM's job lists, in job number order.
func (a *Adapter) fetchJobs(ctx context.Context, path string, q url.Values, what string) ([]job, error) {
	var l jobList
	if err := a.read(ctx, path, q, what, &l); err != nil {
		return nil, err
	}
	slices.SortFunc(l.Jobs, func(x, y job) int { return strings.Compare(x.ID, y.ID) })
	return l.Jobs, nil
}

func (a *Adapter) getJob(ctx context.Context, number string) (json.RawMessage, error) {
	j, err := a.readJob(ctx, number)
	if err != nil {
		return nil, err
	}
	rec, err := a.jobRecord(ctx, j)
	if err != nil {
		return nil, err
	}
	return practice.Marshal(&rec)
}

func (a *Adapter) readJob(ctx context.Context, number string) (*job, error) {
	var one jobOne
	if err := a.read(ctx, "/v3.1/job.api/get/"+url.PathEscape(number), nil, "job", &one); err != nil {
		return nil, err
	}
	if one.Job == nil {
		return nil, notFound(practice.Jobs, "job_"+number)
	}
	return one.Job, nil
}

func (a *Adapter) jobStage(j *job) string {
	return a.stages.Load().stage(j.State, strings.TrimSpace(j.CompletedDate) != "")
}

// jobOwner is the job's manager, else its partner.
func (a *Adapter) jobOwner(j *job) string {
	for _, p := range []*party{j.Manager, j.Partner} {
		if p != nil && p.UUID != "" {
			return "usr_" + p.UUID
		}
	}
	return ""
}

// jobRecord translates a job and stamps it.
func (a *Adapter) jobRecord(ctx context.Context, j *job) (practice.Job, error) {
	bad := func(err error) (practice.Job, error) {
		return practice.Job{}, upstream.Malformed(a.c.Label(), "job "+j.ID, err)
	}
	if !numberRE.MatchString(j.ID) {
		return bad(fmt.Errorf("job number %q", j.ID))
	}
	deadline, err := xpmDate(j.DueDate)
	if err != nil {
		return bad(err)
	}
	started, err := xpmTime(j.StartDate, a.loc)
	if err != nil {
		return bad(err)
	}
	completed, err := xpmTime(j.CompletedDate, a.loc)
	if err != nil {
		return bad(err)
	}
	rec := practice.Job{ID: "job_" + j.ID, Object: "job", Title: j.Name, Type: j.Type, Owner: practice.Known(a.jobOwner(j)),
		Stage: a.jobStage(j), Deadline: deadline}
	if j.Client != nil && j.Client.UUID != "" {
		rec.Client = practice.Known("cli_" + j.Client.UUID)
	}
	if practice.ClosedStage(rec.Stage) && !completed.IsZero() {
		rec.ClosedAt = &completed
	}
	st, err := a.stamps.Of(ctx, stamps.Read{Kind: practice.Jobs, ID: rec.ID, Content: &rec})
	if err != nil {
		return practice.Job{}, err
	}
	if rec.ClosedAt == nil && practice.ClosedStage(rec.Stage) {
		rec.ClosedAt = &st.At
	}
	// XPM publishes no creation time on a job: created_at is its start
	// date, null when it has none.
	rec.CreatedAt, rec.UpdatedAt, rec.Version = practice.KnownAt(started), st.At, practice.VersionAt(st.At)
	return rec, nil
}

// xpmDay writes a date as XPM's writes take it.
func xpmDay(d string) string { return strings.ReplaceAll(d, "-", "") }
