package quickbooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// The JSON shapes of QuickBooks Online's Accounting API v3, by the element
// names of its published schemas (Finance.xsd, IntuitRestServiceDef.xsd),
// which its JSON uses too. Only what the adapter reads is declared.

// ref is a ReferenceType: the referenced entity's id as value, its name.
type ref struct {
	Value string `json:"value"`
	Name  string `json:"name,omitempty"`
}

// metaData is ModificationMetaData.
type metaData struct {
	CreateTime      string `json:"CreateTime,omitempty"`
	LastUpdatedTime string `json:"LastUpdatedTime,omitempty"`
}

// linkedTxn is LinkedTxn: another transaction this one is tied to.
type linkedTxn struct {
	TxnID   string `json:"TxnId"`
	TxnType string `json:"TxnType"`
}

// invoice is an Invoice. A deleted one (change data capture) carries
// status "Deleted" and little more than its Id and MetaData.
type invoice struct {
	ID          string      `json:"Id"`
	SyncToken   string      `json:"SyncToken"`
	Status      string      `json:"status,omitempty"`
	MetaData    metaData    `json:"MetaData"`
	DocNumber   string      `json:"DocNumber"`
	TxnDate     string      `json:"TxnDate"`
	DueDate     string      `json:"DueDate"`
	PrivateNote string      `json:"PrivateNote"`
	TotalAmt    json.Number `json:"TotalAmt"`
	Balance     json.Number `json:"Balance"`
	CurrencyRef ref         `json:"CurrencyRef"`
	CustomerRef ref         `json:"CustomerRef"`
	LinkedTxn   []linkedTxn `json:"LinkedTxn"`
}

// payment is a Payment: money from a customer applied, line by line, to
// invoices (a line's LinkedTxn).
type payment struct {
	ID               string        `json:"Id"`
	Status           string        `json:"status,omitempty"`
	MetaData         metaData      `json:"MetaData"`
	TxnDate          string        `json:"TxnDate"`
	PaymentMethodRef *ref          `json:"PaymentMethodRef"`
	PaymentRefNum    string        `json:"PaymentRefNum"`
	PrivateNote      string        `json:"PrivateNote"`
	Line             []paymentLine `json:"Line"`
}

type paymentLine struct {
	LinkedTxn []linkedTxn `json:"LinkedTxn"`
}

// invoices names the invoices a payment is applied to.
func (p *payment) invoices() []string {
	var ids []string
	for _, l := range p.Line {
		for _, t := range l.LinkedTxn {
			if t.TxnType == "Invoice" {
				ids = append(ids, t.TxnID)
			}
		}
	}
	return ids
}

// queryResponse is QueryResponse: a page of one entity (or, in change
// data capture, of each entity asked for).
type queryResponse struct {
	Invoice       []invoice  `json:"Invoice"`
	Payment       []payment  `json:"Payment"`
	Estimate      []estimate `json:"Estimate"`
	StartPosition int        `json:"startPosition"`
	MaxResults    int        `json:"maxResults"`
}

// response is IntuitResponse, the envelope of every answer.
type response struct {
	Invoice       *invoice       `json:"Invoice"`
	Payment       *payment       `json:"Payment"`
	Estimate      *estimate      `json:"Estimate"`
	QueryResponse *queryResponse `json:"QueryResponse"`
	CDCResponse   []cdcResponse  `json:"CDCResponse"`
	Fault         *fault         `json:"Fault"`
	Time          string         `json:"time"`
}

// cdcResponse is CDCResponse: one QueryResponse per entity.
type cdcResponse struct {
	QueryResponse []queryResponse `json:"QueryResponse"`
}

// fault is Fault: the errors of a refused request and its type
// (ValidationFault, AuthenticationFault, ThrottleExceeded, ...).
type fault struct {
	Type  string       `json:"type"`
	Error []faultError `json:"Error"`
}

type faultError struct {
	Code string `json:"code"`
}

func decode(b []byte) (response, error) {
	var r response
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&r); err != nil {
		return r, err
	}
	return r, nil
}

// knownFaults are the fault types Intuit documents; any other is named
// "Fault", so that nothing the vendor wrote reaches an error message.
var knownFaults = map[string]bool{"ValidationFault": true, "AuthenticationFault": true, "AuthorizationFault": true,
	"ThrottleExceeded": true, "SystemFault": true, "ServiceFault": true}

// FaultError is an answer of QuickBooks carrying a Fault: its status, its
// type and its first error's code, and none of its messages, which are
// the vendor's text. A ValidationFault with code 610 (object not found)
// matches practice.ErrNotFound; an AuthenticationFault,
// practice.ErrNeedsReconnect once a fresh token was refused too; any
// other, practice.ErrBadUpstream (502 upstream_unavailable).
type FaultError struct {
	Status int
	Type   string
	Code   string
	// Reconnect says the company refused a token just refreshed.
	Reconnect bool
}

func (e *FaultError) Error() string {
	s := fmt.Sprintf("quickbooks answered %d with a %s", e.Status, e.Type)
	if e.Code != "" {
		s += " (code " + e.Code + ")"
	}
	return s
}

func (e *FaultError) Is(target error) bool {
	switch target {
	case practice.ErrNotFound:
		return e.Code == "610" || e.Status == http.StatusNotFound
	case practice.ErrNeedsReconnect:
		return e.Reconnect
	case practice.ErrBadUpstream:
		return e.Code != "610" && e.Status != http.StatusNotFound && !e.Reconnect
	}
	return false
}

// faultOf reads the Fault of a refused answer's body; Type "Fault" when
// the body holds none.
func faultOf(status int, body []byte) *FaultError {
	e := &FaultError{Status: status, Type: "Fault"}
	var r struct {
		Fault *fault `json:"Fault"`
	}
	if json.Unmarshal(body, &r) != nil || r.Fault == nil {
		return e
	}
	if knownFaults[r.Fault.Type] {
		e.Type = r.Fault.Type
	}
	if len(r.Fault.Error) > 0 && digitsOnly(r.Fault.Error[0].Code) {
		e.Code = r.Fault.Error[0].Code
	}
	return e
}

func digitsOnly(s string) bool {
	return s != "" && len(s) <= 20 && strings.Trim(s, "0123456789") == ""
}

// qbTime reads QuickBooks' times (RFC 3339 with the company's offset,
// "2015-07-24T10:35:08-07:00"); empty is the zero time.
func qbTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q is not RFC 3339", s)
	}
	return t.UTC(), nil
}

// qbDate checks a date (xs:date, "2015-07-24"), "" for none.
func qbDate(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	d, _, _ := strings.Cut(s, "T")
	if len(d) > 10 {
		d = d[:10] // an offset after the date
	}
	if _, err := time.Parse(time.DateOnly, d); err != nil {
		return "", fmt.Errorf("date %q is not a date", s)
	}
	return d, nil
}

var errNoEntity = errors.New("the answer holds no entity")

func isNotFound(err error) bool { return errors.Is(err, practice.ErrNotFound) }
