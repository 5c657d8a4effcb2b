package xero

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

// Xero's published shapes, the members we read; member names match
// exactly, as Xero writes them. Amounts stay as the digits Xero wrote, so
// that they never pass through a float.

type invoices struct {
	Pagination *pagination `json:"pagination"`
	Invoices   []invoice
}

type pagination struct {
	PageCount int `json:"pageCount"`
	ItemCount int `json:"itemCount"`
}

type invoice struct {
	InvoiceID       string
	InvoiceNumber   string
	Type            string
	Status          string
	Contact         contact
	Date            string
	DueDate         string
	Total           amount
	AmountDue       amount
	AmountPaid      amount
	AmountCredited  amount
	CurrencyCode    string
	FullyPaidOnDate string
	UpdatedDateUTC  string
	Payments        []payment
	// How many of each are allocated to the invoice; settledVia asks no
	// more of them.
	CreditNotes, Prepayments, Overpayments count
}

type contact struct{ ContactID, Name string }

type quotes struct {
	Quotes []quote
}

type quote struct {
	QuoteID        string
	QuoteNumber    string
	Title          string
	Status         string
	Contact        contact
	Date           string
	Total          amount
	CurrencyCode   string
	UpdatedDateUTC string
	LineItems      []lineItem
}

type lineItem struct{ Description string }

type payment struct {
	Date      string
	Reference string
	Status    string
	Account   *account
}

type account struct{ Code, Name string }

// decodeInvoices reads an answer of GET /Invoices.
func decodeInvoices(b []byte) (invoices, error) {
	var body invoices
	err := upstream.DecodeJSON(b, &body)
	return body, err
}

// amount is a Xero amount as written: a JSON number (or, leniently, a
// string of one).
type amount string

func (a *amount) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	switch d.PeekKind() {
	case 'n', '"', '0':
		tok, err := d.ReadToken()
		if err != nil {
			return err
		}
		*a = ""
		if tok.Kind() != 'n' {
			*a = amount(tok.String())
		}
		return nil
	}
	return errors.New("an amount is a number or a string")
}

// count is how many elements an array has; the elements themselves are
// checked and passed over without being kept.
type count int

func (c *count) UnmarshalJSONFrom(d *jsontext.Decoder) error {
	switch d.PeekKind() {
	case 'n':
		*c = 0
		_, err := d.ReadToken()
		return err
	case '[':
	default:
		return errors.New("want an array")
	}
	if _, err := d.ReadToken(); err != nil {
		return err
	}
	n := 0
	for d.PeekKind() != ']' {
		if err := d.SkipValue(); err != nil {
			return err
		}
		n++
	}
	*c = count(n)
	_, err := d.ReadToken()
	return err
}

// xeroTime reads Xero's times: the Microsoft JSON form
// "/Date(1541176290160+0000)/" that the API sends, or ISO 8601 with or
// without a zone ("2024-06-21T01:15:39.902" in webhooks, UTC). Empty is
// the zero time.
func xeroTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if rest, ok := strings.CutPrefix(s, "/Date("); ok {
		rest, ok = strings.CutSuffix(rest, ")/")
		// The offset says which zone the wall time was in; the
		// milliseconds are UTC already.
		if i := strings.IndexAny(rest[min(1, len(rest)):], "+-"); ok && i >= 0 {
			off := rest[i+1:]
			rest = rest[:i+1]
			ok = len(off) == 5 && digits(off[1:])
		}
		ms, err := strconv.ParseInt(rest, 10, 64)
		if !ok || err != nil {
			return time.Time{}, fmt.Errorf("time %q is not a Xero date", s)
		}
		return time.UnixMilli(ms).UTC(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04:05", time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q is not a Xero date", s)
}

// xeroDate is a Xero date as YYYY-MM-DD, "" for none. Xero dates carry
// midnight UTC of the organisation's calendar day.
func xeroDate(s string) (string, error) {
	t, err := xeroTime(s)
	if err != nil || t.IsZero() {
		return "", err
	}
	return t.Format(time.DateOnly), nil
}

// decimal2 writes a Xero amount with exactly two decimal places, rounding
// half away from zero on the digits themselves.
func decimal2(n amount) (string, error) {
	s := strings.TrimSpace(string(n))
	if s == "" {
		return "0.00", nil
	}
	neg := s[0] == '-'
	if s[0] == '-' || s[0] == '+' {
		s = s[1:]
	}
	if s == "" || s == "." {
		return "", fmt.Errorf("amount %q is not a decimal", string(n))
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" {
		intPart = "0"
	}
	if !digits(intPart) || !digits(frac) && frac != "" {
		return "", fmt.Errorf("amount %q is not a decimal", string(n))
	}
	// The cents, rounded up, must fit an int64.
	intPart = strings.TrimLeft(intPart, "0")
	var cents int64
	if len(intPart) <= 17 {
		for i := 0; i < len(intPart); i++ {
			cents = cents*10 + int64(intPart[i]-'0')
		}
	}
	if len(intPart) > 17 || cents > (math.MaxInt64-100)/100 {
		return "", fmt.Errorf("amount %q is too large", string(n))
	}
	decimal := func(i int) int64 {
		if i < len(frac) {
			return int64(frac[i] - '0')
		}
		return 0
	}
	cents = cents*100 + decimal(0)*10 + decimal(1)
	if decimal(2) >= 5 {
		cents++
	}
	var buf [24]byte
	out := buf[:0]
	if neg && cents != 0 {
		out = append(out, '-')
	}
	out = strconv.AppendInt(out, cents/100, 10)
	return string(append(out, '.', byte('0'+cents%100/10), byte('0'+cents%10))), nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// positive reports whether an amount is above zero: any digit but 0, and
// no minus sign.
func positive(n amount) bool {
	s := strings.TrimSpace(string(n))
	if s == "" || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= '1' && s[i] <= '9' {
			return true
		}
	}
	return false
}

// Decimal2 writes a decimal amount written as a JSON number (another
// ledger's, QuickBooks') with exactly two places, as decimal2 does Xero's.
func Decimal2(s string) (string, error) { return decimal2(amount(s)) }
