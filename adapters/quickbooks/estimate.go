package quickbooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/proposals"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/xero"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/stamps"
)

// A firm's estimates are its proposals: each is the contract's engagement
// eng_qb-<Id>. Its status is TxnStatus (QboEstimateStatusEnum) through
// the proposals mapping: Pending is sent, or proposed while QuickBooks
// says it still needs to be sent (EmailStatus NeedToSend); Accepted
// signed; Rejected declined; Closed (an invoice made of it, or closed by
// hand) ended; a deleted estimate is ended too, as last seen. Its scope
// is its lines' products and services, its fee TotalAmt in its currency.
// signed_at is the LastUpdatedTime of the first state read accepted:
// QuickBooks publishes AcceptedDate, a date without a time or zone, so it
// cannot say when in the day the client accepted. QuickBooks links an
// estimate to the invoice made of it (LinkedTxn), never to work, so
// released_jobs is [].

// estimate is an Estimate (a SalesTransaction). A deleted one (change
// data capture) carries status "Deleted" and little more than its Id and
// MetaData.
type estimate struct {
	ID           string         `json:"Id"`
	Status       string         `json:"status,omitempty"`
	MetaData     metaData       `json:"MetaData"`
	DocNumber    string         `json:"DocNumber"`
	TxnDate      string         `json:"TxnDate"`
	TxnStatus    string         `json:"TxnStatus"`
	EmailStatus  string         `json:"EmailStatus"`
	AcceptedDate string         `json:"AcceptedDate"`
	TotalAmt     json.Number    `json:"TotalAmt"`
	CurrencyRef  ref            `json:"CurrencyRef"`
	CustomerRef  ref            `json:"CustomerRef"`
	LinkedTxn    []linkedTxn    `json:"LinkedTxn"`
	Line         []estimateLine `json:"Line"`
}

// estimateLine is a Line: a product or service sold (its ItemRef names
// it), a description, or a subtotal.
type estimateLine struct {
	Description         string `json:"Description"`
	DetailType          string `json:"DetailType"`
	SalesItemLineDetail *struct {
		ItemRef ref `json:"ItemRef"`
	} `json:"SalesItemLineDetail"`
}

// estimatePage is a query page of estimates.
type estimatePage struct {
	estimates []estimate
	full      bool // the page held maxResults rows: another may follow
}

func engagementID(qbID string) string { return "eng_qb-" + qbID }

// parseEngagementID takes QuickBooks' Id (digits) out of eng_qb-<Id>.
func parseEngagementID(id string) (string, bool) {
	n, ok := strings.CutPrefix(id, "eng_qb-")
	return n, ok && digitsOnly(n)
}

// listEstimates returns a page of the company's estimates as engagements,
// in Id order, read by `select * from Estimate STARTPOSITION n MAXRESULTS
// 1000`.
func (a *Adapter) listEstimates(ctx context.Context, t practice.Tenant, q practice.Query, cur paging.Cursor) (practice.Page, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	since := q.Filter.UpdatedSince
	w := paging.Walk[estimate]{
		Fetch: func(ctx context.Context, _, token string) (paging.VendorPage[estimate], error) {
			start := 1
			if token != "" {
				n, err := strconv.Atoi(token)
				if err != nil || n < 1 {
					return paging.VendorPage[estimate]{}, &practice.InvalidError{Code: "invalid_cursor", Param: "cursor",
						Message: "The cursor is not one this collection issued; pass the next_cursor of the previous page."}
				}
				start = n
			}
			p, err := a.queryEstimates(ctx, since, start)
			if err != nil {
				return paging.VendorPage[estimate]{}, err
			}
			vp := paging.VendorPage[estimate]{Items: p.estimates}
			if p.full {
				vp.Next = strconv.Itoa(start + len(p.estimates))
			}
			return vp, nil
		},
		ID: func(e estimate) string { return e.ID },
		Convert: func(ctx context.Context, es []paging.Found[estimate]) ([]json.RawMessage, error) {
			return paging.Each(ctx, 1, len(es), func(ctx context.Context, i int) (json.RawMessage, error) {
				e := &es[i].Item
				raw, err := a.estimateJSON(ctx, t, e)
				if err != nil && digitsOnly(e.ID) {
					// A row that cannot be read is its estimate's alone.
					return nil, practice.Unusable(practice.Engagements, engagementID(e.ID), "the estimate", err)
				}
				return raw, err
			})
		},
		MaxPages: a.cfg.MaxScanPages,
	}
	return w.Collect(ctx, paging.Frame{}, cur, limit)
}

// queryEstimates reads the page of estimates from start (1-based), or the
// same page read moments ago.
func (a *Adapter) queryEstimates(ctx context.Context, since time.Time, start int) (estimatePage, error) {
	stmt := queryStatement("Estimate", since, start)
	return cachedQuery(a, &a.lastEstimates, stmt, func() (estimatePage, error) {
		body, err := a.get(ctx, "/query", url.Values{"query": {stmt}}, "estimates")
		if err != nil {
			return estimatePage{}, err
		}
		var p estimatePage
		if body.QueryResponse != nil {
			p.estimates = body.QueryResponse.Estimate
		}
		p.full = len(p.estimates) == maxResults
		return p, nil
	})
}

// getEstimate reads one estimate as its engagement. An estimate QuickBooks
// no longer has (deleted) is the engagement last seen, ended; one never
// seen is not found. A deletion once confirmed is final (QuickBooks
// never gives a deleted estimate back, nor its Id to another): the
// engagement is answered ended without asking again, or every daily
// reconciliation, whose listing never holds it, would read each deleted
// estimate once more, for ever.
func (a *Adapter) getEstimate(ctx context.Context, t practice.Tenant, qbID string) (json.RawMessage, error) {
	deleted, err := a.deletedBefore(ctx, qbID)
	if err != nil {
		return nil, err
	}
	if deleted {
		raw, err := a.endedEstimate(ctx, qbID, a.clock.Now())
		if err != nil || raw != nil {
			return raw, err
		}
		// The copy forgot it (a purge): as never seen.
		return nil, fmt.Errorf("quickbooks: no engagement %q: %w", engagementID(qbID), practice.ErrNotFound)
	}
	body, err := a.get(ctx, "/estimate/"+qbID, nil, "estimate "+qbID)
	if errors.Is(err, practice.ErrNotFound) {
		raw, lerr := a.endEstimate(ctx, qbID, a.clock.Now())
		if lerr != nil {
			return nil, lerr
		}
		if raw == nil {
			return nil, err
		}
		return raw, nil
	}
	if err != nil {
		return nil, err
	}
	if body.Estimate == nil {
		return nil, upstream.Malformed(a.c.Label(), "estimate "+qbID, errNoEntity)
	}
	return a.estimateJSON(ctx, t, body.Estimate)
}

// DeletionsPrefix is the prefix of the keys under which the deletions of
// firm's estimates confirmed are kept in the upstream state store.
func DeletionsPrefix(firm string) string {
	return "deleted/" + changes.StateKey(practice.Tenant{Firm: firm}, practice.Engagements, "")
}

// deletedBefore reports whether the estimate's deletion was confirmed
// before (endEstimate).
func (a *Adapter) deletedBefore(ctx context.Context, qbID string) (bool, error) {
	raw, err := a.signings.State.Last(ctx, DeletionsPrefix(a.cfg.Firm)+engagementID(qbID))
	if err != nil {
		return false, fmt.Errorf("quickbooks: deletion of estimate %s: %w", qbID, err)
	}
	return raw != nil, nil
}

// endEstimate is endedEstimate for a deletion QuickBooks confirmed (its
// not found, or change data capture's status "Deleted"), which it
// remembers when the estimate was seen: it is never asked again.
func (a *Adapter) endEstimate(ctx context.Context, qbID string, at time.Time) (json.RawMessage, error) {
	raw, err := a.endedEstimate(ctx, qbID, at)
	if err != nil || raw == nil {
		return raw, err
	}
	if err := a.signings.State.Save(ctx, DeletionsPrefix(a.cfg.Firm)+engagementID(qbID), []byte(`{}`)); err != nil {
		return nil, fmt.Errorf("quickbooks: save the deletion of estimate %s: %w", qbID, err)
	}
	return raw, nil
}

// endedEstimate is the engagement of a deleted estimate: as last seen,
// ended at (kept as it was when it had ended already); nil when it was
// never seen.
func (a *Adapter) endedEstimate(ctx context.Context, qbID string, at time.Time) (json.RawMessage, error) {
	last, err := a.rec.State.Last(ctx, changes.StateKey(practice.Tenant{Firm: a.cfg.Firm}, practice.Engagements, engagementID(qbID)))
	if err != nil || last == nil {
		return nil, err
	}
	var e practice.Engagement
	if err := json.Unmarshal(last, &e); err != nil || e.ID != engagementID(qbID) {
		return nil, nil // not an engagement this adapter wrote: as never seen
	}
	if e.Status == "ended" {
		return last, nil
	}
	at = at.UTC()
	if !at.After(e.UpdatedAt) {
		at = e.UpdatedAt.Add(time.Millisecond)
	}
	e.Status, e.UpdatedAt, e.Version = "ended", at, practice.VersionAt(at)
	return practice.Marshal(&e)
}

// estimateStatus is an estimate's engagement status.
func estimateStatus(e *estimate) (string, error) {
	st := e.TxnStatus
	if st == "" {
		st = "Pending" // QuickBooks' default for a new estimate
	}
	if strings.EqualFold(st, "Pending") && e.EmailStatus == "NeedToSend" {
		return "proposed", nil
	}
	return proposals.Status(st)
}

// estimateJSON translates an estimate into the engagement it proposes.
func (a *Adapter) estimateJSON(ctx context.Context, t practice.Tenant, e *estimate) (json.RawMessage, error) {
	bad := func(err error) (json.RawMessage, error) {
		return nil, upstream.Malformed(a.c.Label(), "estimate "+e.ID, err)
	}
	if !digitsOnly(e.ID) {
		return bad(fmt.Errorf("Id %q is not a QuickBooks id", e.ID))
	}
	status, err := estimateStatus(e)
	if err != nil {
		return bad(err)
	}
	fee, err := xero.Decimal2(string(e.TotalAmt))
	if err != nil {
		return bad(err)
	}
	currency := e.CurrencyRef.Value
	if currency == "" {
		currency = "USD"
	}
	updated, err := qbTime(e.MetaData.LastUpdatedTime)
	if err != nil {
		return bad(err)
	}
	if updated.IsZero() {
		return bad(fmt.Errorf("no MetaData.LastUpdatedTime"))
	}
	created, err := qbTime(e.MetaData.CreateTime)
	if err != nil {
		return bad(err)
	}
	if created.After(updated) {
		created = updated
	}
	var names []string
	for _, l := range e.Line {
		switch {
		case l.SalesItemLineDetail != nil && l.SalesItemLineDetail.ItemRef.Name != "":
			names = append(names, l.SalesItemLineDetail.ItemRef.Name)
		case l.DetailType == "SalesItemLineDetail" || l.DetailType == "DescriptionOnly":
			names = append(names, l.Description)
		}
	}
	title := ""
	if strings.TrimSpace(strings.Join(names, "")) == "" && e.DocNumber != "" {
		title = "Estimate " + e.DocNumber
	}
	rec := practice.Engagement{ID: engagementID(e.ID), Object: "engagement", Status: status,
		Scope: proposals.Scope(title, names), Fee: practice.Money{Amount: fee, Currency: currency},
		Billing: "fixed", ReleasedJobs: []string{}, CreatedAt: practice.KnownAt(created), UpdatedAt: updated, Version: practice.VersionAt(updated)}
	client, err := a.client(ctx, t, e.CustomerRef)
	if err != nil {
		return nil, err
	}
	rec.Client = client
	if rec.SignedAt, err = a.signings.At(ctx, rec.ID, status == "signed", updated); err != nil {
		return nil, fmt.Errorf("quickbooks: %w", err)
	}
	// The client is the records system's, linked apart from the
	// estimate: a link found later moves the version (practice/stamps).
	seen, err := a.stamps.Of(ctx, stamps.Read{Kind: practice.Engagements, ID: rec.ID, Content: &rec, Vendor: updated})
	if err != nil {
		return nil, err
	}
	rec.UpdatedAt, rec.Version = seen.At, seen.Version()
	return practice.Marshal(&rec)
}
