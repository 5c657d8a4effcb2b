package vendortest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// XeroQuote is a Xero quote as the double keeps it: Status is Xero's
// (DRAFT, SENT, DECLINED, ACCEPTED, INVOICED, DELETED); Lines are its
// line items' descriptions; Total is a decimal written as a JSON number.
// Xero keeps no time of acceptance, and no link from a quote to the work
// it led to.
type XeroQuote struct {
	QuoteID, QuoteNumber, Title, Status string
	ContactID, ContactName              string
	Date, Expiry                        time.Time
	Lines                               []string
	Total, CurrencyCode                 string
	Updated                             time.Time
}

// AddQuote stores a quote.
func (x *Xero) AddQuote(q XeroQuote) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.quotes == nil {
		x.quotes = map[string]*XeroQuote{}
	}
	x.quotes[q.QuoteID] = &q
}

// EditQuote changes a quote as a user would in Xero (sending it, marking
// it accepted) at the time given, which becomes its UpdatedDateUTC.
func (x *Xero) EditQuote(id string, at time.Time, edit func(*XeroQuote)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	q := x.quotes[id]
	edit(q)
	q.Updated = at
}

func (x *Xero) quoteJSON(q *XeroQuote) map[string]any {
	lines := []any{}
	for i, d := range q.Lines {
		lines = append(lines, map[string]any{"LineItemID": "5f7a612b-fdcc-4d33-90fa-" + pad12(i), "Description": d,
			"Quantity": json.Number("1.0000"), "UnitAmount": json.Number("0.00"), "LineAmount": json.Number("0.00"),
			"AccountCode": "200", "TaxType": "OUTPUT2"})
	}
	return map[string]any{
		"QuoteID": q.QuoteID, "QuoteNumber": q.QuoteNumber, "Reference": "", "Terms": "",
		"Contact":   map[string]any{"ContactID": q.ContactID, "Name": q.ContactName},
		"LineItems": lines,
		"Date":      msDate(q.Date), "DateString": q.Date.Format("2006-01-02T15:04:05"),
		"ExpiryDate": msDate(q.Expiry), "ExpiryDateString": q.Expiry.Format("2006-01-02T15:04:05"),
		"Status": q.Status, "CurrencyCode": q.CurrencyCode, "CurrencyRate": 1.0,
		"SubTotal": json.Number(q.Total), "TotalTax": json.Number("0.00"), "Total": json.Number(q.Total),
		"TotalDiscount": json.Number("0.00"), "Title": q.Title, "Summary": "",
		"UpdatedDateUTC": msDate(q.Updated), "LineAmountTypes": "EXCLUSIVE",
	}
}

func pad12(i int) string {
	s := strconv.Itoa(i)
	for len(s) < 12 {
		s = "0" + s
	}
	return s
}

// serveQuotes answers GET /Quotes (page, order QuoteID, If-Modified-Since;
// 100 quotes a page, the published size) and GET /Quotes/{id}.
func (x *Xero) serveQuotes(w http.ResponseWriter, r *http.Request, id string) {
	if id != "" {
		q := x.quotes[id]
		if q == nil {
			writeJSON(w, http.StatusNotFound, []byte(`{"ErrorNumber":404,"Type":"NotFoundException","Message":"The resource you're looking for cannot be found"}`))
			return
		}
		b, _ := json.Marshal(map[string]any{"Id": "resp", "Status": "OK", "ProviderName": "practicegw test",
			"DateTimeUTC": msDate(time.Now()), "Quotes": []any{x.quoteJSON(q)}})
		writeJSON(w, http.StatusOK, b)
		return
	}
	q := r.URL.Query()
	since, ok := listQuery(w, r, "QuoteID ASC")
	if !ok {
		return
	}
	var matched []any
	for _, qid := range sortedKeys(x.quotes) {
		if qt := x.quotes[qid]; since.IsZero() || !qt.Updated.Before(since) {
			matched = append(matched, x.quoteJSON(qt))
		}
	}
	page, _ := strconv.Atoi(q.Get("page"))
	if page < 1 {
		page = 1
	}
	const size = 100
	start := min((page-1)*size, len(matched))
	end := min(start+size, len(matched))
	b, _ := json.Marshal(map[string]any{"Id": "resp", "Status": "OK", "ProviderName": "practicegw test",
		"DateTimeUTC": msDate(time.Now()), "Quotes": append([]any{}, matched[start:end]...)})
	writeJSON(w, http.StatusOK, b)
}

// listQuery reads what a Xero list takes of every list alike: order (the
// one the double keeps) and If-Modified-Since; it answers Xero's 400 and
// reports false for what it cannot take.
func listQuery(w http.ResponseWriter, r *http.Request, order string) (since time.Time, ok bool) {
	if o := r.URL.Query().Get("order"); o != "" && o != order {
		writeJSON(w, http.StatusBadRequest, []byte(`{"ErrorNumber":16,"Type":"QueryParseException","Message":"unsupported order"}`))
		return since, false
	}
	if v := r.Header.Get("If-Modified-Since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, []byte(`{"ErrorNumber":10,"Type":"ValidationException","Message":"bad If-Modified-Since"}`))
			return since, false
		}
		since = t
	}
	return since, true
}
