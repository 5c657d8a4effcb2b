package xpm

import (
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// XPM's published shapes (API v3.1, JSON), the members we read, by their
// published names. XPM writes flags as strings ("Yes", "No") and amounts
// as JSON numbers, which stay as written until formatted.

// answer is what every XPM answer carries: Status "OK", or "ERROR" with
// a description.
type answer struct {
	Status           string `json:"status"`
	ErrorDescription string `json:"errorDescription"`
}

type party struct {
	UUID string `json:"uuid"`
	Name string `json:"name"`
}

type clientType struct {
	Name string `json:"name"`
}

type contact struct {
	UUID      string `json:"uuid"`
	Name      string `json:"name"`
	Mobile    string `json:"mobile"`
	Email     string `json:"email"`
	Phone     string `json:"phone"`
	IsDeleted string `json:"isDeleted"`
	IsPrimary string `json:"isPrimary"`
	Position  string `json:"position"`
}

type client struct {
	UUID              string      `json:"uuid"`
	Name              string      `json:"name"`
	FirstName         string      `json:"firstName"`
	LastName          string      `json:"lastName"`
	Email             string      `json:"email"`
	Phone             string      `json:"phone"`
	Country           string      `json:"country"`
	PostalCountry     string      `json:"postalCountry"`
	IsProspect        string      `json:"isProspect"`
	IsArchived        string      `json:"isArchived"`
	IsDeleted         string      `json:"isDeleted"`
	AccountManager    *party      `json:"accountManager"`
	JobManager        *party      `json:"jobManager"`
	Type              *clientType `json:"type"`
	BusinessStructure string      `json:"businessStructure"`
	TaxNumber         string      `json:"taxNumber"`
	Contacts          []contact   `json:"contacts"`
}

type clientList struct {
	answer
	Clients []client `json:"clients"`
}

type clientOne struct {
	answer
	Client *client `json:"client"`
}

type job struct {
	ID            string `json:"id"`
	UUID          string `json:"uuid"`
	Name          string `json:"name"`
	Client        *party `json:"client"`
	State         string `json:"state"`
	Type          string `json:"type"`
	StartDate     string `json:"startDate"`
	DueDate       string `json:"dueDate"`
	CompletedDate string `json:"completedDate"`
	Manager       *party `json:"manager"`
	Partner       *party `json:"partner"`
}

type jobList struct {
	answer
	Jobs []job `json:"jobs"`
}

type jobOne struct {
	answer
	Job *job `json:"job"`
}

type named struct {
	answer
	JobStates  []party `json:"jobStates"`
	Categories []party `json:"categories"`
}

type staff struct {
	UUID  string `json:"uuid"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

type staffList struct {
	answer
	StaffList []staff `json:"staffList"`
}

type staffOne struct {
	answer
	Staff *staff `json:"staff"`
}

type invoice struct {
	ID                 string         `json:"id"`
	UUID               string         `json:"uuid"`
	Type               string         `json:"type"`
	Date               string         `json:"date"`
	DueDate            string         `json:"dueDate"`
	AmountIncludingTax jsontext.Value `json:"amountIncludingTax"`
	AmountPaid         jsontext.Value `json:"amountPaid"`
	AmountOutstanding  jsontext.Value `json:"amountOutstanding"`
	Status             string         `json:"status"`
	Client             *party         `json:"client"`
}

type invoiceList struct {
	answer
	// XPM's description lets an entry be null.
	Invoices []*invoice `json:"invoices"`
}

type invoiceOne struct {
	answer
	Invoice *invoice `json:"invoice"`
}

type quote struct {
	ID                 string         `json:"id"`
	Name               string         `json:"name"`
	Type               string         `json:"type"`
	State              string         `json:"state"`
	Date               string         `json:"date"`
	AmountIncludingTax jsontext.Value `json:"amountIncludingTax"`
	Client             *party         `json:"client"`
	// Tasks come with detailed=true; a quote read without them has none.
	Tasks []quoteTask `json:"tasks"`
}

type quoteTask struct {
	Name string `json:"name"`
}

type quoteList struct {
	answer
	// XPM's description lets an entry be null, as for invoices.
	Quotes []*quote `json:"quotes"`
}

type quoteOne struct {
	answer
	Quote *quote `json:"quote"`
}

type payment struct {
	Amount    jsontext.Value `json:"amount"`
	Date      string         `json:"date"`
	Reference string         `json:"reference"`
}

type paymentList struct {
	answer
	Payments []*payment `json:"payments"`
}

// yes reads XPM's string flags.
func yes(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "true", "1":
		return true
	}
	return false
}

// flag writes one.
func flag(b bool) string {
	if b {
		return "Yes"
	}
	return "No"
}

// xpmTime reads XPM's times, written without a zone in the practice's
// own ("2008-08-29T00:00:00"); empty is the zero time.
func xpmTime(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", time.DateOnly, "20060102"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q is not an XPM date", s)
}

// xpmDate is the calendar day an XPM date names, YYYY-MM-DD; "" for none.
func xpmDate(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	day, _, _ := strings.Cut(s, "T")
	for _, layout := range []string{time.DateOnly, "20060102"} {
		if t, err := time.Parse(layout, day); err == nil {
			return t.Format(time.DateOnly), nil
		}
	}
	return "", fmt.Errorf("date %q is not an XPM date", s)
}

// amount reads an XPM amount exactly; null or absent is zero.
func amount(v jsontext.Value) (*big.Rat, error) {
	s := strings.TrimSpace(string(v))
	if s == "" || s == "null" {
		return new(big.Rat), nil
	}
	s = strings.Trim(s, `"`)
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("amount %s is not a decimal", v)
	}
	return r, nil
}

// money2 writes an amount with two places, halves away from zero.
func money2(r *big.Rat) string {
	s := r.FloatString(2)
	if s == "-0.00" {
		return "0.00"
	}
	return s
}
