package vendortest

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"time"
)

// XPMQuote is an XPM quote: State is XPM's (Draft, Issued, Accepted,
// Declined, Archived); Date is what quote.api/list's range selects on;
// amounts are decimals written as JSON numbers. An archived quote is only
// in quote.api/list. XPM publishes no link from a quote to the jobs made
// for it, and no time of its acceptance.
type XPMQuote struct {
	ID, Name, Type, State, ClientUUID string
	Date, Valid                       time.Time
	Amount, Tax                       string
	Tasks                             []string
}

// AddQuote stores a quote.
func (x *XPM) AddQuote(q XPMQuote) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.quotes[q.ID] = &q
}

// EditQuote changes a quote as a user would in XPM (issuing it, the
// client accepting it).
func (x *XPM) EditQuote(id string, edit func(*XPMQuote)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	edit(x.quotes[id])
}

// DeleteQuote removes a quote.
func (x *XPM) DeleteQuote(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.quotes, id)
}

// quoteJSON is a QuoteDto; tasks, costs and options only when detailed.
func (x *XPM) quoteJSON(q *XPMQuote, detailed bool) map[string]any {
	var client any
	if c := x.clients[q.ClientUUID]; c != nil {
		client = map[string]any{"uuid": c.UUID, "name": c.Name}
	}
	amount, tax := q.Amount, q.Tax
	if amount == "" {
		amount = "0"
	}
	if tax == "" {
		tax = "0"
	}
	a, _ := new(big.Rat).SetString(amount)
	t, _ := new(big.Rat).SetString(tax)
	if a == nil || t == nil {
		panic("vendortest: quote " + q.ID + " amounts are not decimals")
	}
	total := json.Number(new(big.Rat).Add(a, t).FloatString(2))
	typ := q.Type
	if typ == "" {
		typ = "Quote"
	}
	m := map[string]any{"id": q.ID, "name": q.Name, "description": "", "type": typ, "state": q.State,
		"budget": json.Number("0"), "optionExplanation": "", "date": xpmTime(q.Date), "validDate": xpmTime(q.Valid),
		"estimatedCost": json.Number("0"), "estimatedCostTax": json.Number("0"), "estimatedCostIncludingTax": json.Number("0"),
		"amount": json.Number(amount), "amountTax": json.Number(tax), "amountIncludingTax": total, "client": client}
	if detailed {
		tasks := []any{}
		for _, name := range q.Tasks {
			tasks = append(tasks, map[string]any{"name": name, "description": "", "estimatedMinutes": 60,
				"billableRate": json.Number("0"), "billable": "Yes", "amount": json.Number("0"), "amountTax": json.Number("0"),
				"amountIncludingTax": json.Number("0")})
		}
		m["tasks"], m["costs"], m["options"] = tasks, []any{}, []any{}
	}
	return m
}

func (x *XPM) quoteList(c xpmCall, keep func(*XPMQuote) bool) {
	detailed := c.q.Get("detailed") == "true"
	out := []any{}
	for _, id := range sortedKeys(x.quotes) {
		if q := x.quotes[id]; keep(q) {
			out = append(out, x.quoteJSON(q, detailed))
		}
	}
	reply(c.w, map[string]any{"quotes": out})
}

// listQuotesDated answers quote.api/list: current and archived quotes
// dated within from and to.
func (x *XPM) listQuotesDated(c xpmCall) {
	from, err1 := time.Parse("20060102", c.q.Get("from"))
	to, err2 := time.Parse("20060102", c.q.Get("to"))
	if err1 != nil || err2 != nil || to.Before(from) {
		refuse(c.w, http.StatusBadRequest, "from and to must be yyyyMMdd")
		return
	}
	x.quoteList(c, func(q *XPMQuote) bool {
		d := q.Date.Truncate(24 * time.Hour)
		return q.State != "Draft" && !d.Before(from) && !d.After(to)
	})
}

// getQuote answers quote.api/get, which is always detailed.
func (x *XPM) getQuote(c xpmCall) {
	q := x.quotes[c.rest]
	if q == nil {
		refuse(c.w, http.StatusNotFound, "Quote not found")
		return
	}
	reply(c.w, map[string]any{"quote": x.quoteJSON(q, true)})
}

// createQuote answers job.api/createquote: a draft quote of the job's
// name for its client, dated today, its number in the answer.
func (x *XPM) createQuote(c xpmCall) {
	j := x.jobs[c.rest]
	if j == nil {
		refuse(c.w, http.StatusNotFound, "Job not found")
		return
	}
	x.seq++
	id := fmt.Sprintf("Q%06d", x.seq)
	x.quotes[id] = &XPMQuote{ID: id, Name: j.Name, State: "Draft", ClientUUID: j.ClientUUID, Date: x.now()}
	reply(c.w, map[string]any{"id": id})
}

var xpmQuoteRoutes = []xpmRoute{
	{http.MethodGet, "quote.api/current", func(x *XPM, c xpmCall) {
		x.quoteList(c, func(q *XPMQuote) bool { return q.State != "Draft" && q.State != "Archived" })
	}},
	{http.MethodGet, "quote.api/draft", func(x *XPM, c xpmCall) {
		x.quoteList(c, func(q *XPMQuote) bool { return q.State == "Draft" })
	}},
	{http.MethodGet, "quote.api/list", (*XPM).listQuotesDated},
	{http.MethodGet, "quote.api/get/", (*XPM).getQuote},
	{http.MethodPost, "job.api/createquote/", (*XPM).createQuote},
}
