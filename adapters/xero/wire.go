package xero

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Xero's published shapes, the fields we read. Amounts stay as the digits
// Xero wrote, so that they never pass through a float.

type invoices struct {
	Pagination *struct {
		Page, PageSize, PageCount, ItemCount int
	} `json:"pagination"`
	Invoices []invoice
}

type invoice struct {
	InvoiceID       string
	InvoiceNumber   string
	Type            string
	Status          string
	Contact         struct{ ContactID, Name string }
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
	CreditNotes     []json.RawMessage
	Prepayments     []json.RawMessage
	Overpayments    []json.RawMessage
}

type payment struct {
	PaymentID      string
	Date           string
	Amount         amount
	Reference      string
	BatchPaymentID string
	Status         string
	Account        *struct{ Code, Name string }
}

// amount is a Xero amount as written: a JSON number (or, leniently, a
// string of one).
type amount string

func (a *amount) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	switch {
	case s == "null":
		*a = ""
		return nil
	case strings.HasPrefix(s, `"`):
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*a = amount(v)
		return nil
	}
	if !json.Valid(b) {
		return fmt.Errorf("amount %s is not JSON", b)
	}
	*a = amount(s)
	return nil
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
	sign := ""
	if s[0] == '-' || s[0] == '+' {
		if s[0] == '-' {
			sign = "-"
		}
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
	frac += "000"
	cents, err := strconv.ParseInt(intPart+frac[:2], 10, 64)
	if err != nil {
		return "", fmt.Errorf("amount %q: %w", string(n), err)
	}
	if frac[2] >= '5' {
		cents++
	}
	out := fmt.Sprintf("%d.%02d", cents/100, cents%100)
	if cents == 0 {
		sign = ""
	}
	return sign + out, nil
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
