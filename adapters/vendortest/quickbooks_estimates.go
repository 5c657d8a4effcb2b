package vendortest

import (
	"slices"
	"strconv"
	"time"
)

// QBEstimate is a QuickBooks Online estimate as the double keeps it: a
// proposal to a customer whose TxnStatus (QboEstimateStatusEnum) is
// Pending, Accepted, Closed or Rejected, with the invoice made from it
// linked once it is invoiced.
type QBEstimate struct {
	ID, DocNumber            string
	CustomerID, CustomerName string
	TxnDate                  time.Time
	// Lines are the names of its lines' products and services.
	Lines []string
	Total string
	// Currency is USD unless set.
	Currency string
	// Status is TxnStatus: Pending unless set.
	Status string
	// EmailStatus is NotSet, NeedToSend or EmailSent; NotSet unless set.
	EmailStatus string
	// AcceptedDate is the date it was accepted, set by Accept.
	AcceptedDate time.Time
	// Invoice is the id of the invoice made from it, "" until one is.
	Invoice string
	Created time.Time
	Updated time.Time
	sync    int
	deleted bool
}

// AddEstimate stores an estimate (and its customer).
func (q *QuickBooks) AddEstimate(e QBEstimate) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.estimates == nil {
		q.estimates = map[string]*QBEstimate{}
	}
	if e.Currency == "" {
		e.Currency = "USD"
	}
	if e.Status == "" {
		e.Status = "Pending"
	}
	if e.EmailStatus == "" {
		e.EmailStatus = "NotSet"
	}
	if e.Created.IsZero() {
		e.Created = e.Updated
	}
	q.customers[e.CustomerID] = e.CustomerName
	q.estimates[e.ID] = &e
	q.told("Estimate", e.ID, "Create", e.Updated)
}

// SetEstimateStatus changes an estimate's TxnStatus, as the firm or its
// customer would in QuickBooks: Accepted stamps AcceptedDate.
func (q *QuickBooks) SetEstimateStatus(id, status string, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.estimates[id]
	e.Status, e.Updated = status, at
	if status == "Accepted" {
		e.AcceptedDate = at
	}
	e.sync++
	q.told("Estimate", id, "Update", at)
}

// InvoiceEstimate makes an invoice of an accepted estimate, as QuickBooks'
// "Create invoice" does: the invoice and the estimate link each other, and
// the estimate is Closed. It returns the invoice's id.
func (q *QuickBooks) InvoiceEstimate(id string, at time.Time) string {
	q.mu.Lock()
	e := q.estimates[id]
	q.seq++
	inv := QBInvoice{ID: strconv.Itoa(800000 + q.seq), DocNumber: "E" + e.DocNumber, CustomerID: e.CustomerID,
		CustomerName: e.CustomerName, TxnDate: at, DueDate: at.AddDate(0, 0, 30), Total: e.Total, Currency: e.Currency,
		Created: at, Updated: at}
	e.Invoice, e.Status, e.Updated = inv.ID, "Closed", at
	e.sync++
	q.told("Estimate", id, "Update", at)
	q.mu.Unlock()
	q.AddInvoice(inv)
	return inv.ID
}

// DeleteEstimate deletes an estimate: reads no longer find it, and change
// data capture reports it as Deleted.
func (q *QuickBooks) DeleteEstimate(id string, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.estimates[id]
	e.deleted, e.Updated = true, at
	e.sync++
	q.told("Estimate", id, "Delete", at)
}

func (q *QuickBooks) estimateJSON(e *QBEstimate) map[string]any {
	meta := map[string]any{"CreateTime": qbStamp(e.Created), "LastUpdatedTime": qbStamp(e.Updated)}
	if e.deleted {
		return map[string]any{"Id": e.ID, "domain": "QBO", "status": "Deleted", "MetaData": meta}
	}
	links := []map[string]any{}
	if e.Invoice != "" {
		links = append(links, map[string]any{"TxnId": e.Invoice, "TxnType": "Invoice"})
	}
	lines := []map[string]any{}
	for i, name := range e.Lines {
		lines = append(lines, map[string]any{"Id": strconv.Itoa(i + 1), "LineNum": i + 1, "Description": name,
			"Amount": json0, "DetailType": "SalesItemLineDetail",
			"SalesItemLineDetail": map[string]any{"ItemRef": map[string]any{"value": strconv.Itoa(i + 1), "name": name}}})
	}
	if len(lines) > 0 {
		lines[0]["Amount"] = qbAmount(e.Total)
	}
	lines = append(lines, map[string]any{"Amount": qbAmount(e.Total), "DetailType": "SubTotalLineDetail",
		"SubTotalLineDetail": map[string]any{}})
	if q.schema != nil && !slices.Contains(q.schema.simple["QboEstimateStatusEnum"].enums, e.Status) {
		// TxnStatus is a string in the schema; its documentation names
		// QboEstimateStatusEnum as an estimate's values.
		q.conformance.note("estimate " + e.ID + ": TxnStatus " + e.Status + " is not one of QboEstimateStatusEnum's values")
	}
	m := map[string]any{
		"Id": e.ID, "SyncToken": strconv.Itoa(e.sync), "domain": "QBO", "sparse": false, "MetaData": meta,
		"DocNumber": e.DocNumber, "TxnDate": e.TxnDate.Format(time.DateOnly), "TxnStatus": e.Status,
		"CurrencyRef": map[string]any{"value": e.Currency, "name": "United States Dollar"},
		"CustomerRef": map[string]any{"value": e.CustomerID, "name": e.CustomerName},
		"LinkedTxn":   links, "Line": lines, "TotalAmt": qbAmount(e.Total), "EmailStatus": e.EmailStatus,
		"ExpirationDate": e.TxnDate.AddDate(0, 0, 30).Format(time.DateOnly),
	}
	if !e.AcceptedDate.IsZero() {
		m["AcceptedDate"] = e.AcceptedDate.Format(time.DateOnly)
		m["AcceptedBy"] = e.CustomerName
	}
	return m
}

// json0 is a zero amount.
var json0 = qbAmount("0")
