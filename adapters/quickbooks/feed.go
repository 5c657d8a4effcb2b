package quickbooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// cursorPrefix marks a change data capture position: the time of the
// last answer, from which the next call asks.
const cursorPrefix = "cdc1."

// Changes reads QuickBooks' change data capture after cursor: one GET
// .../cdc?entities=Invoice,Estimate,Payment&changedSince=<t> for the three
// entities, whatever changed: invoices are the page's own changes,
// estimates its engagements' (Others), which a sync keeps when the
// company's estimates are the firm's engagements. "" starts at the present without a call. A cursor
// older than the 30 days CDC looks back, or an answer at CDC's cap of
// 1,000 objects (which cannot be paged), is practice.ErrFeedExpired: the
// sync reconciles from a full query rather than leave a gap. Deleted
// invoices ("status":"Deleted") are Gone; a payment's invoices are
// translated with it, so an invoice paid says how. A deleted estimate is
// its engagement as last seen, ended.
func (a *Adapter) Changes(ctx context.Context, t practice.Tenant, cursor string) (practice.ChangesPage, error) {
	if !a.serves(t) {
		return practice.ChangesPage{}, fmt.Errorf("quickbooks: no records for %s: %w", t, practice.ErrNotFound)
	}
	now := a.clock.Now().UTC()
	if cursor == "" {
		return practice.ChangesPage{Next: cursorPrefix + now.Format(time.RFC3339Nano)}, nil
	}
	since, err := parseCursor(cursor)
	if err != nil {
		return practice.ChangesPage{}, err
	}
	if now.Sub(since) > cdcLookBack-time.Hour {
		return practice.ChangesPage{}, fmt.Errorf("quickbooks: change data capture looks back 30 days, the last read was %s: %w",
			since.Format(time.RFC3339), practice.ErrFeedExpired)
	}
	entities := "Invoice,Payment"
	if a.keepsEngagements() {
		entities = "Invoice,Estimate,Payment"
	}
	q := url.Values{"entities": {entities}, "changedSince": {since.Add(-cdcOverlap).Format(time.RFC3339)}}
	body, err := a.get(ctx, "/cdc", q, "change data capture")
	if err != nil {
		return practice.ChangesPage{}, err
	}
	var invs []invoice
	var ests []estimate
	known := map[string]*payment{}
	objects := 0
	for _, c := range body.CDCResponse {
		for _, qr := range c.QueryResponse {
			invs = append(invs, qr.Invoice...)
			ests = append(ests, qr.Estimate...)
			for i := range qr.Payment {
				known[qr.Payment[i].ID] = &qr.Payment[i]
			}
			objects += len(qr.Invoice) + len(qr.Payment) + len(qr.Estimate)
		}
	}
	if objects >= maxResults {
		return practice.ChangesPage{}, fmt.Errorf("quickbooks: %d changes since %s, more than one change data capture answer holds: %w",
			objects, since.Format(time.RFC3339), practice.ErrFeedExpired)
	}
	if invs, err = a.withPaidInvoices(ctx, invs, known); err != nil {
		return practice.ChangesPage{}, err
	}
	payments, err := a.paymentsOf(ctx, invs, known)
	if err != nil {
		return practice.ChangesPage{}, err
	}
	page := practice.ChangesPage{Next: cursorPrefix + answerTime(body.Time, now).Format(time.RFC3339Nano)}
	for i := range invs {
		if invs[i].Status == "Deleted" {
			page.Gone = append(page.Gone, invoiceID(invs[i].ID))
			continue
		}
		raw, err := a.invoiceJSON(ctx, t, &invs[i], payments)
		if err != nil {
			return practice.ChangesPage{}, err
		}
		page.Changed = append(page.Changed, json.RawMessage(raw))
	}
	engagements := practice.KindChanges{Kind: practice.Engagements}
	if engagements.Changed, err = a.estimateChanges(ctx, t, ests, now); err != nil {
		return practice.ChangesPage{}, err
	}
	if len(engagements.Changed) > 0 {
		page.Others = append(page.Others, engagements)
	}
	return page, nil
}

// withPaidInvoices is invs with the invoices of the payments known that
// invs lacks, read again: a payment changed without its invoices (a
// method corrected) changes how they were settled.
func (a *Adapter) withPaidInvoices(ctx context.Context, invs []invoice, known map[string]*payment) ([]invoice, error) {
	seen := map[string]bool{}
	for i := range invs {
		seen[invs[i].ID] = true
	}
	var extra []string
	for _, p := range known {
		if p.Status == "Deleted" {
			continue
		}
		for _, id := range p.invoices() {
			if !seen[id] && digitsOnly(id) {
				seen[id] = true
				extra = append(extra, id)
			}
		}
	}
	for _, id := range extra {
		inv, _, err := a.readInvoice(ctx, id)
		if err != nil && !isNotFound(err) {
			return nil, err
		}
		if err == nil {
			invs = append(invs, inv)
		}
	}
	return invs, nil
}

// estimateChanges are the engagements of the estimates change data
// capture names: a deleted one as last seen, ended (none when it was
// never seen), the others as they are.
func (a *Adapter) estimateChanges(ctx context.Context, t practice.Tenant, ests []estimate, now time.Time) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for i := range ests {
		var raw json.RawMessage
		var err error
		if ests[i].Status == "Deleted" {
			if !digitsOnly(ests[i].ID) {
				continue
			}
			at, _ := qbTime(ests[i].MetaData.LastUpdatedTime)
			if at.IsZero() {
				at = now
			}
			if raw, err = a.endEstimate(ctx, ests[i].ID, at); err != nil {
				return nil, err
			}
			if raw == nil {
				continue // never seen: nothing to end
			}
		} else if raw, err = a.estimateJSON(ctx, t, &ests[i]); err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

// answerTime is the time QuickBooks stamped its answer with, else ours
// at the call: the next call asks for changes since.
func answerTime(stamp string, fallback time.Time) time.Time {
	if t, err := qbTime(stamp); err == nil && !t.IsZero() {
		return t
	}
	return fallback
}

func parseCursor(cursor string) (time.Time, error) {
	s, ok := strings.CutPrefix(cursor, cursorPrefix)
	t, err := time.Parse(time.RFC3339Nano, s)
	if !ok || err != nil {
		// A position of another version: start again with a
		// reconciliation rather than guess.
		return time.Time{}, fmt.Errorf("quickbooks: change data capture position %q unreadable: %w", cursor, practice.ErrFeedExpired)
	}
	return t, nil
}
