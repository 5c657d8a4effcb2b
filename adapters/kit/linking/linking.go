// Package linking finds the practice's client a ledger's customer or a
// document store's client folder stands for, in the firm's records
// system, by one rule whichever systems the firm pairs:
//
//  0. a customer of the records system's own vendor account (Karbon's
//     billing beside the same practice's Karbon records: Candidate.Account)
//     is that client, by its id;
//  1. the vendor's own cross-reference first (Karbon's ExternalKey, set
//     to the Xero contact id when the practice links Xero): the one client
//     carrying it is the client, two or more are ambiguous;
//  2. else an exact match of the normalised name, email or tax number
//     (Name, Email, TaxNumber): the client is the one every key the
//     customer carries finds, when one of them finds it alone;
//  3. else nothing. An ambiguous or missing match links nothing.
//
// The other side's keys are unique by its vendor's own rule: Xero's
// contact names and QuickBooks' display names are unique in an
// organisation, a folder's name in its parent. A record that links
// nothing names no client (null), never an id of its own that /v1 would
// answer 404 to.
package linking

import (
	"context"
	"strings"
	"unicode"

	"github.com/practicegw/practicegw/practice"
)

// Candidate is a ledger's customer or a document store's client folder,
// as the records system is asked for its client.
type Candidate struct {
	// Ref is the vendor's own id of the customer (a Xero ContactID, a
	// QuickBooks customer id, a folder's path), by which the unmatched
	// are counted.
	Ref string
	// External is the id the records system may hold as its
	// cross-reference (Karbon's ExternalKey: a Xero ContactID or an
	// Intuit customer id); empty for a folder.
	External string
	// Name, Email and TaxNumber are what the customer is known by; any
	// may be empty.
	Name, Email, TaxNumber string
	// Account names the vendor account Ref is an id in, when the asking
	// system's clients may be the records system's own (Karbon's billing
	// beside Karbon's records): its upstream.Client.BudgetAccount, a
	// digest of the account, never a credential. A records system of the
	// same account takes Ref as its own client's id; empty otherwise.
	Account string
}

// Outcome is how a candidate matched.
type Outcome int

const (
	// Missing: no client of the records system matches.
	Missing Outcome = iota
	// Linked: one client matches, certainly.
	Linked
	// Ambiguous: more than one client matches, or the keys disagree.
	Ambiguous
	// Later: the records system could not be asked at once (its
	// allowance spent by its own sync) during a first read that leaves
	// links for later (practice.LinksLater): the record names no client
	// until the read that follows the first one links it.
	Later
)

func (o Outcome) String() string {
	switch o {
	case Linked:
		return "linked"
	case Ambiguous:
		return "ambiguous"
	case Later:
		return "later"
	}
	return "missing"
}

// Link is the answer for one candidate: Client is the practice's client
// id when Outcome is Linked, else empty.
type Link struct {
	Client  string
	Outcome Outcome
}

// Linker is a firm's records system as a ledger or document store asks
// it for the client of one of its own.
type Linker interface {
	LinkClient(ctx context.Context, t practice.Tenant, c Candidate) (Link, error)
}

// Name is a name as it is compared: case folded, spaces and punctuation
// between words collapsed to one space ("Ada  Client", "ada client" and
// "Ada Client." are one name; "Birch & Co" and "Birch and Co" are not).
func Name(s string) string {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return unicode.IsSpace(r) || r == ',' || r == '.'
	})
	return strings.Join(words, " ")
}

// Email is an email address as it is compared: trimmed, case folded; ""
// for what is no address.
func Email(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if at := strings.LastIndexByte(s, '@'); at <= 0 || at == len(s)-1 || strings.ContainsAny(s, " \t") {
		return ""
	}
	return s
}

// TaxNumber is a tax number as it is compared: its letters and digits
// alone, upper case ("GB 123 456 789" is "GB123456789"); "" when it has
// fewer than four digits (a placeholder such as "n/a" or "0").
func TaxNumber(s string) string {
	var b strings.Builder
	digits := 0
	for _, r := range s {
		switch {
		case unicode.IsDigit(r):
			digits++
			b.WriteRune(r)
		case unicode.IsLetter(r):
			b.WriteRune(unicode.ToUpper(r))
		}
	}
	if digits < 4 {
		return ""
	}
	return b.String()
}

// Entry is one client of the records system as the directory holds it.
type Entry struct {
	ID string
	// Refs are the other systems' ids the vendor holds for the client
	// (Karbon's ExternalKey).
	Refs                   []string
	Name, Email, TaxNumber string
}

// Directory is a records system's clients by every key they are matched
// by. It is built whole and not changed after; a directory read again is
// a new one.
type Directory struct {
	keys [4]map[string][]string // by ref, name, email, tax number: client ids
	size int
}

// NewDirectory indexes entries.
func NewDirectory(entries []Entry) *Directory {
	d := &Directory{size: len(entries)}
	for i := range d.keys {
		d.keys[i] = map[string][]string{}
	}
	for _, e := range entries {
		if e.ID == "" {
			continue
		}
		for _, r := range e.Refs {
			d.add(0, r, e.ID)
		}
		d.add(1, Name(e.Name), e.ID)
		d.add(2, Email(e.Email), e.ID)
		d.add(3, TaxNumber(e.TaxNumber), e.ID)
	}
	return d
}

func (d *Directory) add(i int, key, id string) {
	if key == "" {
		return
	}
	for _, have := range d.keys[i][key] {
		if have == id {
			return
		}
	}
	d.keys[i][key] = append(d.keys[i][key], id)
}

// Len is the number of clients the directory was built of.
func (d *Directory) Len() int { return d.size }

// Match is the client c stands for, by the package's rule.
func (d *Directory) Match(c Candidate) Link {
	if c.External != "" {
		switch ids := d.keys[0][c.External]; len(ids) {
		case 0:
		case 1:
			return Link{Client: ids[0], Outcome: Linked}
		default:
			return Link{Outcome: Ambiguous}
		}
	}
	return d.MatchKeys([]string{Name(c.Name), Email(c.Email), TaxNumber(c.TaxNumber)})
}

// MatchKeys is Match's second step over keys already normalised (name,
// email, tax number; "" for one the candidate lacks): the client one key
// finds alone, when every key that finds any client finds it too.
func (d *Directory) MatchKeys(keys []string) Link {
	var found [][]string
	unique := ""
	for i, k := range keys {
		if k == "" || i >= 3 {
			continue
		}
		ids := d.keys[i+1][k]
		if len(ids) == 0 {
			continue
		}
		found = append(found, ids)
		if len(ids) == 1 {
			if unique != "" && unique != ids[0] {
				return Link{Outcome: Ambiguous}
			}
			unique = ids[0]
		}
	}
	if len(found) == 0 {
		return Link{Outcome: Missing}
	}
	if unique == "" {
		return Link{Outcome: Ambiguous}
	}
	for _, ids := range found {
		if !contains(ids, unique) {
			return Link{Outcome: Ambiguous}
		}
	}
	return Link{Client: unique, Outcome: Linked}
}

func contains(ids []string, id string) bool {
	for _, have := range ids {
		if have == id {
			return true
		}
	}
	return false
}

// Ref is the /v1 value of a record's client: the id when linked, null
// (nil) otherwise.
func (l Link) Ref() *string {
	if l.Outcome != Linked || l.Client == "" {
		return nil
	}
	id := l.Client
	return &id
}
