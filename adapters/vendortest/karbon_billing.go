package vendortest

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Karbon's billing, as its published description defines it: GET
// /v3/Invoices (BillingInvoice rows; $filter on InvoiceStatus with eq
// alone; $orderby InvoiceDate, CreatedAt, UpdatedAt or InvoiceNumber,
// each with desc; $top, $skip and @odata.nextLink), GET
// /v3/Invoices/{InvoiceKey} ($expand of LineItems, Payments, Data), GET
// /v3/Payments and GET /v3/Payments/{PaymentKey} (BillingPayment, with
// KarbonPayment's card type and funding for Karbon Payments). Drafts and
// invoices awaiting approval are not published: an invoice appears when
// it is approved. An invoice's amount due is its total less the payments
// not reversed; a payment that clears it makes it Paid, a reversal that
// opens it again makes it AwaitingPayment. Every change stamps UpdatedAt.

// KarbonInvoice is a Karbon invoice as the double keeps it. Amounts are
// decimals ("1200.50").
type KarbonInvoice struct {
	InvoiceKey, InvoiceNumber string
	// ClientKey and ClientType ("Contact", "Organization") name the
	// billed client; ClientName is its name on the invoice.
	ClientKey, ClientType, ClientName string
	Total, Tax                        string
	CurrencyCode                      string
	// Status is the InvoiceStatus: Approved, AwaitingPayment, Paid,
	// Exported or Voided.
	Status               string
	InvoiceDate, DueDate time.Time
	CreatedAt, UpdatedAt time.Time
	PaymentInstructions  string
}

// KarbonInvoicePayment is a payment on an invoice: a Karbon Payment
// (PaymentType "Payment", with the card's type and funding) or a manual
// payment (PaymentType "ManualPayment", by PaymentMethod), reversed or not.
type KarbonInvoicePayment struct {
	PaymentKey, InvoiceKey, PaymentReference string
	PaymentType, PaymentMethod               string
	PaymentDate                              time.Time
	Amount                                   string
	CardType, CardFunding                    string
	Reversed                                 bool
}

// karbonInvoiceStatuses are the InvoiceStatus values the description
// publishes.
var karbonInvoiceStatuses = []string{"Approved", "AwaitingPayment", "Paid", "Exported", "Voided"}

// AddInvoice puts an invoice in the double; its amount due is its total
// less its payments.
func (k *Karbon) AddInvoice(inv KarbonInvoice) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !slices.Contains(karbonInvoiceStatuses, inv.Status) {
		panic("karbon double: no InvoiceStatus " + inv.Status)
	}
	if inv.CreatedAt.IsZero() {
		inv.CreatedAt = k.now()
	}
	if inv.UpdatedAt.IsZero() {
		inv.UpdatedAt = inv.CreatedAt
	}
	if inv.CurrencyCode == "" {
		inv.CurrencyCode = "GBP"
	}
	if inv.Tax == "" {
		inv.Tax = "0"
	}
	if k.invoices == nil {
		k.invoices = map[string]*KarbonInvoice{}
	}
	k.changed()
	k.invoices[inv.InvoiceKey] = &inv
}

// SetInvoiceStatus moves an invoice to another InvoiceStatus, as a user
// sending or voiding it would.
func (k *Karbon) SetInvoiceStatus(key, status string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	inv := k.invoices[key]
	if inv == nil || !slices.Contains(karbonInvoiceStatuses, status) {
		panic("karbon double: cannot set invoice " + key + " to " + status)
	}
	k.changed()
	inv.Status, inv.UpdatedAt = status, k.touch(inv.UpdatedAt)
	k.told("Invoice", key, "Updated")
}

// RemoveInvoice deletes an invoice, as a user deleting it in Karbon would.
func (k *Karbon) RemoveInvoice(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.changed()
	delete(k.invoices, key)
}

// PayInvoice records a payment on an invoice and answers its key: a Karbon
// Payment when p.PaymentType is "Payment" (a card: CardType and
// CardFunding "credit" or "debit"; a bank debit: CardFunding "ach" or
// "bank_debit"), else a manual payment by p.PaymentMethod. The invoice is
// Paid once nothing is due.
func (k *Karbon) PayInvoice(p KarbonInvoicePayment) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	inv := k.invoices[p.InvoiceKey]
	if inv == nil {
		panic("karbon double: no invoice " + p.InvoiceKey)
	}
	k.changed()
	if p.PaymentKey == "" {
		p.PaymentKey = "P" + k.nextKey()
	}
	if p.PaymentType == "" {
		p.PaymentType = "ManualPayment"
	}
	if p.PaymentReference == "" {
		p.PaymentReference = fmt.Sprintf("KPY-%d", 1000+len(k.payments))
	}
	if p.PaymentDate.IsZero() {
		p.PaymentDate = k.now()
	}
	k.payments = append(k.payments, &p)
	k.settle(inv)
	k.told("Invoice", inv.InvoiceKey, "Updated")
	return p.PaymentKey
}

// ReverseManualPayment reverses a manual payment, as POST
// /v3/ReverseManualPayment does: the invoice is owed again.
func (k *Karbon) ReverseManualPayment(paymentKey string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, p := range k.payments {
		if p.PaymentKey == paymentKey && p.PaymentType == "ManualPayment" {
			k.changed()
			p.Reversed, p.PaymentType = true, "ManualPaymentReversed"
			k.settle(k.invoices[p.InvoiceKey])
			k.told("Invoice", p.InvoiceKey, "Updated")
			return
		}
	}
	panic("karbon double: no manual payment " + paymentKey)
}

// settle sets an invoice's status from what is due after a payment or a
// reversal, and stamps it; k.mu is held.
func (k *Karbon) settle(inv *KarbonInvoice) {
	if inv == nil {
		return
	}
	due := dueOf(inv, k.paid())
	switch {
	case due.Sign() <= 0 && (inv.Status == "Approved" || inv.Status == "AwaitingPayment"):
		inv.Status = "Paid"
	case due.Sign() > 0 && inv.Status == "Paid":
		inv.Status = "AwaitingPayment"
	}
	inv.UpdatedAt = k.touch(inv.UpdatedAt)
}

// touch is a new UpdatedAt after was: now, or a second after was when the
// clock has not moved past it, so that every change is newer.
func (k *Karbon) touch(was time.Time) time.Time {
	now := k.now()
	if !now.After(was) {
		now = was.Add(time.Second)
	}
	return now
}

// dueOf is the invoice's total less what its payments come to (paid()).
func dueOf(inv *KarbonInvoice, paid map[string]*big.Rat) *big.Rat {
	due := decimal(inv.Total)
	if p := paid[inv.InvoiceKey]; p != nil {
		due.Sub(due, p)
	}
	return due
}

// paid is what each invoice's payments not reversed come to; k.mu is
// held.
func (k *Karbon) paid() map[string]*big.Rat {
	out := map[string]*big.Rat{}
	for _, p := range k.payments {
		if p.Reversed {
			continue
		}
		if out[p.InvoiceKey] == nil {
			out[p.InvoiceKey] = new(big.Rat)
		}
		out[p.InvoiceKey].Add(out[p.InvoiceKey], decimal(p.Amount))
	}
	return out
}

func decimal(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic("karbon double: amount " + s + " is not a decimal")
	}
	return r
}

// number writes an amount as Karbon does: a JSON number.
func number(r *big.Rat) json.Number {
	s := strings.TrimRight(strings.TrimRight(r.FloatString(2), "0"), ".")
	if s == "" || s == "-" {
		s = "0"
	}
	return json.Number(s)
}

// invoiceRow is an invoice as a list gives it, paid being what its
// payments come to (paid()).
func (k *Karbon) invoiceRow(inv *KarbonInvoice, paid map[string]*big.Rat) map[string]any {
	total, tax, due := decimal(inv.Total), decimal(inv.Tax), dueOf(inv, paid)
	var client any
	if inv.ClientKey != "" {
		client = map[string]any{"ClientKey": inv.ClientKey, "ClientType": inv.ClientType, "Name": inv.ClientName,
			"AddressLine": "1 High Street", "City": "London", "StateProvinceCounty": "", "ZipCode": "EC1A 1AA",
			"Country": "United Kingdom", "EmailAddress": "billing@example.com"}
	}
	var instructions any
	if inv.PaymentInstructions != "" {
		instructions = inv.PaymentInstructions
	}
	taxes := []map[string]any{}
	if tax.Sign() != 0 {
		taxes = append(taxes, map[string]any{"TaxName": "VAT", "TaxValue": number(tax)})
	}
	return map[string]any{
		"InvoiceKey": inv.InvoiceKey, "InvoiceNumber": inv.InvoiceNumber,
		"TotalAmountDue": number(due), "InvoiceTotal": number(total),
		"InvoiceSubTotal": number(new(big.Rat).Sub(total, tax)), "InvoiceTaxTotal": number(tax),
		"InvoiceDate":    inv.InvoiceDate.UTC().Truncate(24 * time.Hour).Format(time.RFC3339),
		"PaymentDueDate": inv.DueDate.UTC().Truncate(24 * time.Hour).Format(time.RFC3339),
		"UpdatedAt":      inv.UpdatedAt.UTC().Format(time.RFC3339), "CurrencyCode": inv.CurrencyCode,
		"PaymentInstructions": instructions, "InvoiceStatus": inv.Status, "Client": client, "TaxLineItems": taxes,
	}
}

// invoiceOrder are the $orderby properties the description publishes for
// invoices, each with how two invoices compare.
var invoiceOrder = map[string]func(a, b *KarbonInvoice) int{
	"InvoiceDate":   func(a, b *KarbonInvoice) int { return a.InvoiceDate.Compare(b.InvoiceDate) },
	"CreatedAt":     func(a, b *KarbonInvoice) int { return a.CreatedAt.Compare(b.CreatedAt) },
	"UpdatedAt":     func(a, b *KarbonInvoice) int { return a.UpdatedAt.Compare(b.UpdatedAt) },
	"InvoiceNumber": func(a, b *KarbonInvoice) int { return strings.Compare(a.InvoiceNumber, b.InvoiceNumber) },
}

// listInvoices answers GET /v3/Invoices; k.mu is held.
func (k *Karbon) listInvoices(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// The description's $filter: InvoiceStatus with eq, nothing else.
	if f := strings.TrimSpace(q.Get("$filter")); f != "" {
		prop, rest, _ := strings.Cut(f, " ")
		op, val, _ := strings.Cut(rest, " ")
		val = strings.Trim(strings.TrimSpace(val), "'")
		if prop != "InvoiceStatus" || op != "eq" || !slices.Contains(karbonInvoiceStatuses, val) {
			karbonError(w, http.StatusBadRequest, "4002", fmt.Sprintf("The query specified in the URI is not valid: $filter %q.", f))
			return
		}
	}
	invs := make([]*KarbonInvoice, 0, len(k.invoices))
	for _, key := range sortedKeys(k.invoices) {
		invs = append(invs, k.invoices[key])
	}
	if v := strings.TrimSpace(q.Get("$orderby")); v != "" {
		prop, dir, _ := strings.Cut(v, " ")
		cmp, ok := invoiceOrder[prop]
		if !ok || (dir != "" && dir != "asc" && dir != "desc") {
			karbonError(w, http.StatusBadRequest, "4002", fmt.Sprintf("The query specified in the URI is not valid: $orderby %q.", v))
			return
		}
		slices.SortStableFunc(invs, func(a, b *KarbonInvoice) int {
			if dir == "desc" {
				return cmp(b, a)
			}
			return cmp(a, b)
		})
	}
	rows := make([]map[string]any, 0, len(invs))
	paid := k.paid()
	for _, inv := range invs {
		rows = append(rows, k.invoiceRow(inv, paid))
	}
	k.odataPage(w, r, "Invoices", rows, map[string]func(map[string]any) string{
		"InvoiceStatus": func(m map[string]any) string { s, _ := m["InvoiceStatus"].(string); return s },
	})
}

// getInvoice answers GET /v3/Invoices/{InvoiceKey}; k.mu is held.
func (k *Karbon) getInvoice(w http.ResponseWriter, key string, expand map[string]bool) {
	inv := k.invoices[key]
	if inv == nil {
		karbonError(w, http.StatusNotFound, "4004", "No Invoice found for provided key")
		return
	}
	body := k.invoiceRow(inv, k.paid())
	body["@odata.context"] = k.URL + "/v3/$metadata#Invoices/$entity"
	body["InvoiceMagicLink"] = "https://clientportal.karbonhq.com/invoice-link?token=" + inv.InvoiceKey
	body["InvoicePdfUrl"] = "/v3/Files?token=" + inv.InvoiceKey
	if expand["LineItems"] {
		body["LineItems"] = []map[string]any{{"LineItemKey": inv.InvoiceKey + "-1", "BillableItemType": "Entity",
			"Description": "Professional services", "Quantity": 1, "UnitPrice": inv.Total, "Amount": body["InvoiceSubTotal"]}}
	}
	if expand["Payments"] {
		ps := []map[string]any{}
		for _, p := range k.payments {
			if p.InvoiceKey == key {
				ps = append(ps, map[string]any{"PaymentKey": p.PaymentKey, "PaymentReference": p.PaymentReference,
					"PaymentType": p.PaymentType, "PaymentDate": p.PaymentDate.Format(time.DateOnly), "Amount": number(decimal(p.Amount))})
			}
		}
		body["Payments"] = ps
	}
	if expand["Data"] {
		body["Data"] = []any{}
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}

func (k *Karbon) paymentJSON(p *KarbonInvoicePayment) map[string]any {
	var client any
	if inv := k.invoices[p.InvoiceKey]; inv != nil && inv.ClientKey != "" {
		client = map[string]any{"ClientKey": inv.ClientKey, "ClientType": inv.ClientType, "Name": inv.ClientName}
	}
	kp := map[string]any{"CardType": "", "CardCountry": nil, "CardFunding": "", "PayoutStatus": "",
		"SurchargeAmount": 0, "SurchargeTaxAmount": 0, "KarbonFeeAmount": 0, "KarbonFeeTaxAmount": 0, "NetAmount": 0}
	if p.PaymentType == "Payment" {
		kp["CardType"], kp["CardFunding"], kp["PayoutStatus"] = p.CardType, p.CardFunding, "paid"
		kp["NetAmount"] = number(decimal(p.Amount))
		if p.CardType != "" {
			kp["CardCountry"] = "GB"
		}
	}
	return map[string]any{"PaymentKey": p.PaymentKey, "InvoiceKey": p.InvoiceKey, "PaymentReference": p.PaymentReference,
		"PaymentType": p.PaymentType, "PaymentDate": p.PaymentDate.Format(time.DateOnly), "GrossAmount": number(decimal(p.Amount)),
		"PaymentMethod": p.PaymentMethod, "KarbonPayment": kp, "Client": client}
}

// listPayments answers GET /v3/Payments; k.mu is held.
func (k *Karbon) listPayments(w http.ResponseWriter, r *http.Request) {
	rows := make([]map[string]any, 0, len(k.payments))
	for _, p := range k.payments {
		rows = append(rows, k.paymentJSON(p))
	}
	k.odataPage(w, r, "Payments", rows, nil)
}

// LosePayment makes a payment's own read answer 404 while its invoice
// still lists it (lost false: answer again), as Karbon has been seen to:
// the invoice it paid cannot be told settled how.
func (k *Karbon) LosePayment(key string, lost bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lost == nil {
		k.lost = map[string]bool{}
	}
	k.lost[key] = lost
}

// getPayment answers GET /v3/Payments/{PaymentKey}; k.mu is held.
func (k *Karbon) getPayment(w http.ResponseWriter, key string) {
	for _, p := range k.payments {
		if p.PaymentKey == key && !k.lost[key] {
			body := k.paymentJSON(p)
			body["@odata.context"] = k.URL + "/v3/$metadata#Payments/$entity"
			b, _ := json.Marshal(body)
			writeJSON(w, http.StatusOK, b)
			return
		}
	}
	karbonError(w, http.StatusNotFound, "4004", "No Payment found for provided key")
}
