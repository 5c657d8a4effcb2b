package xero

import (
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Reading a page of invoices was most of what the adapter added to a
// call, by reflection or token by token alike: an invoice is some thirty
// members, most of them ones we never read. This reader works on the
// bytes in place: it takes the members of the wire shapes and checks and
// passes over the rest without copying them. It holds to what
// upstream.DecodeJSON does with those shapes: the whole answer must be
// JSON (RFC 8259); names match exactly; a repeated name takes the last
// value; null is the zero value; invalid UTF-8 in a string becomes U+FFFD;
// a value of the wrong kind is an error.

// decodeInvoices reads an answer of GET /Invoices, which holds about n
// invoices.
func decodeInvoices(b []byte, n int) (invoices, error) {
	var body invoices
	r := reader{b: b}
	r.object(func(name []byte) {
		switch string(name) {
		case "pagination":
			if r.null() {
				body.Pagination = nil
				return
			}
			if body.Pagination == nil {
				body.Pagination = &pagination{}
			}
			r.object(func(name []byte) {
				switch string(name) {
				case "pageCount":
					body.Pagination.PageCount = r.integer()
				default:
					r.skip()
				}
			})
		case "Invoices":
			if r.null() {
				body.Invoices = nil
				return
			}
			body.Invoices = make([]invoice, 0, n)
			r.array(func() {
				body.Invoices = append(body.Invoices, invoice{})
				r.invoice(&body.Invoices[len(body.Invoices)-1])
			})
		default:
			r.skip()
		}
	})
	if r.peek(); r.i < len(r.b) {
		r.fail("data after the answer")
	}
	if r.err != nil {
		return invoices{}, r.error()
	}
	return body, nil
}

func (r *reader) invoice(inv *invoice) {
	r.object(func(name []byte) {
		switch string(name) {
		case "InvoiceID":
			inv.InvoiceID = r.str()
		case "InvoiceNumber":
			inv.InvoiceNumber = r.str()
		case "Type":
			inv.Type = r.str()
		case "Status":
			inv.Status = r.str()
		case "Contact":
			if r.null() {
				inv.Contact = contact{}
				return
			}
			r.object(func(name []byte) {
				switch string(name) {
				case "ContactID":
					inv.Contact.ContactID = r.str()
				case "Name":
					inv.Contact.Name = r.str()
				default:
					r.skip()
				}
			})
		case "Date":
			inv.Date = r.str()
		case "DueDate":
			inv.DueDate = r.str()
		case "Total":
			inv.Total = r.amount()
		case "AmountDue":
			inv.AmountDue = r.amount()
		case "AmountPaid":
			inv.AmountPaid = r.amount()
		case "AmountCredited":
			inv.AmountCredited = r.amount()
		case "CurrencyCode":
			inv.CurrencyCode = r.str()
		case "FullyPaidOnDate":
			inv.FullyPaidOnDate = r.str()
		case "UpdatedDateUTC":
			inv.UpdatedDateUTC = r.str()
		case "Payments":
			if r.null() {
				inv.Payments = nil
				return
			}
			inv.Payments = inv.Payments[:0]
			r.array(func() {
				inv.Payments = append(inv.Payments, payment{})
				r.payment(&inv.Payments[len(inv.Payments)-1])
			})
		case "CreditNotes":
			inv.CreditNotes = r.count()
		case "Prepayments":
			inv.Prepayments = r.count()
		case "Overpayments":
			inv.Overpayments = r.count()
		default:
			r.skip()
		}
	})
}

func (r *reader) payment(p *payment) {
	r.object(func(name []byte) {
		switch string(name) {
		case "Date":
			p.Date = r.str()
		case "Reference":
			p.Reference = r.str()
		case "Status":
			p.Status = r.str()
		case "Account":
			if r.null() {
				p.Account = nil
				return
			}
			if p.Account == nil {
				p.Account = &account{}
			}
			r.object(func(name []byte) {
				switch string(name) {
				case "Code":
					p.Account.Code = r.str()
				case "Name":
					p.Account.Name = r.str()
				default:
					r.skip()
				}
			})
		default:
			r.skip()
		}
	})
}

// reader reads JSON in place. The first failure sticks: every read after
// it is at the end and reads nothing.
type reader struct {
	b       []byte
	i       int
	depth   int
	scratch []byte // where str unescapes
	strs    [128]string

	err   error
	at    int    // the offset of the failure
	where string // the JSON Pointer of the value that failed, built as the reads unwind
}

// maxDepth bounds nesting, as the JSON decoder does.
const maxDepth = 10000

// peek passes over whitespace and returns the next byte, 0 at the end.
func (r *reader) peek() byte {
	for ; r.i < len(r.b); r.i++ {
		switch c := r.b[r.i]; c {
		case ' ', '\t', '\n', '\r':
		default:
			return c
		}
	}
	return 0
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
		r.at = r.i
	}
	r.i = len(r.b)
}

// within notes, as a failure unwinds, the member or element it was in.
func (r *reader) within(token string) {
	if r.err != nil {
		r.where = "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(token) + r.where
	}
}

func (r *reader) error() error {
	if r.where == "" {
		return fmt.Errorf("offset %d: %w", r.at, r.err)
	}
	return fmt.Errorf("%s (offset %d): %w", r.where, r.at, r.err)
}

// wrongKind fails on the next value: not JSON, or not the kind wanted.
func (r *reader) wrongKind(want string) {
	var got string
	switch c := r.peek(); {
	case r.i == len(r.b):
		r.fail("unexpected end of JSON, want %s", want)
		return
	case c == '{':
		got = "an object"
	case c == '[':
		got = "an array"
	case c == '"':
		got = "a string"
	case c == '-' || c >= '0' && c <= '9':
		got = "a number"
	case c == 't' || c == 'f':
		got = "a boolean"
	case c == 'n':
		got = "null"
	default:
		r.fail("invalid character %q, want %s", c, want)
		return
	}
	r.fail("got %s, want %s", got, want)
}

// open reads the '{' or '[' that opens an object or array.
func (r *reader) open() bool {
	r.i++
	r.depth++
	if r.depth > maxDepth {
		r.fail("nested more than %d deep", maxDepth)
		return false
	}
	return true
}

// object reads an object, calling member with each name to read exactly
// one value; null is an object without members. The name is valid until
// the next read.
func (r *reader) object(member func(name []byte)) {
	switch r.peek() {
	case 'n':
		r.literal("null")
		return
	case '{':
	default:
		r.wrongKind("an object")
		return
	}
	if !r.open() {
		return
	}
	if r.peek() == '}' {
		r.i++
		r.depth--
		return
	}
	for {
		if r.peek() != '"' {
			r.wrongKind("a member name")
			return
		}
		name := r.memberName()
		if r.peek() != ':' {
			r.wrongKind("':' after a member name")
			return
		}
		r.i++
		member(name)
		if r.err != nil {
			r.within(string(name))
			return
		}
		switch r.peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			r.depth--
			return
		default:
			r.wrongKind("',' or '}' after a member")
			return
		}
	}
}

// array reads an array, calling elem to read each element; null is an
// empty array.
func (r *reader) array(elem func()) {
	switch r.peek() {
	case 'n':
		r.literal("null")
		return
	case '[':
	default:
		r.wrongKind("an array")
		return
	}
	if !r.open() {
		return
	}
	if r.peek() == ']' {
		r.i++
		r.depth--
		return
	}
	for n := 0; ; n++ {
		elem()
		if r.err != nil {
			r.within(strconv.Itoa(n))
			return
		}
		switch r.peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			r.depth--
			return
		default:
			r.wrongKind("',' or ']' after an element")
			return
		}
	}
}

// memberName reads a name, unescaped.
func (r *reader) memberName() []byte {
	q, verbatim := r.quoted()
	switch {
	case r.err != nil:
		return nil
	case verbatim:
		return q[1 : len(q)-1]
	}
	return unquote(nil, q)
}

// str reads a string; null is "".
func (r *reader) str() string {
	switch r.peek() {
	case '"':
		q, verbatim := r.quoted()
		switch {
		case r.err != nil:
			return ""
		case verbatim:
			return r.string(q[1 : len(q)-1])
		}
		// Xero escapes every slash ("\/Date(1243382400000+0000)\/").
		r.scratch = unquote(r.scratch[:0], q)
		return r.string(r.scratch)
	case 'n':
		r.literal("null")
		return ""
	}
	r.wrongKind("a string")
	return ""
}

// string makes a string of b. Short strings are kept for the rest of the
// answer, so that the values that repeat from invoice to invoice (status,
// currency, contact, dates, amounts) are one string each rather than one
// allocation each.
func (r *reader) string(b []byte) string {
	if len(b) > 40 {
		return string(b)
	}
	h := maphash.Bytes(strSeed, b) % uint64(len(r.strs))
	if s := r.strs[h]; s == string(b) {
		return s
	}
	s := string(b)
	r.strs[h] = s
	return s
}

var strSeed = maphash.MakeSeed()

// amount reads an amount as written: the digits of a number, or what a
// string holds; null is "". decimal2 checks them.
func (r *reader) amount() amount {
	switch c := r.peek(); {
	case c == '"':
		return amount(r.str())
	case c == '-' || c >= '0' && c <= '9':
		return amount(r.string(r.number()))
	case c == 'n':
		r.literal("null")
		return ""
	}
	r.wrongKind("a number or a string")
	return ""
}

// integer reads an int; null is 0.
func (r *reader) integer() int {
	switch c := r.peek(); {
	case c == '-' || c >= '0' && c <= '9':
		at := r.i
		digits := r.number()
		n, err := strconv.Atoi(string(digits))
		if err != nil && r.err == nil {
			r.i = at
			r.fail("got %s, want an integer", digits)
		}
		return n
	case c == 'n':
		r.literal("null")
		return 0
	}
	r.wrongKind("an integer")
	return 0
}

// count reads an array, only to count its elements.
func (r *reader) count() int {
	n := 0
	r.array(func() {
		n++
		r.skip()
	})
	return n
}

// skip reads a value and keeps nothing of it.
func (r *reader) skip() {
	switch c := r.peek(); {
	case c == '{':
		r.object(func([]byte) { r.skip() })
	case c == '[':
		r.array(r.skip)
	case c == '"':
		r.quoted()
	case c == '-' || c >= '0' && c <= '9':
		r.number()
	case c == 't':
		r.literal("true")
	case c == 'f':
		r.literal("false")
	case c == 'n':
		r.literal("null")
	default:
		r.wrongKind("a value")
	}
}

// null reads a null if one is next.
func (r *reader) null() bool {
	if r.peek() != 'n' {
		return false
	}
	r.literal("null")
	return true
}

func (r *reader) literal(lit string) {
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		r.fail("invalid literal, want %s", lit)
		return
	}
	r.i += len(lit)
}

// number reads a number (RFC 8259 section 6) and returns it as written.
func (r *reader) number() []byte {
	start := r.i
	i := r.i
	digits := func() int {
		n := 0
		for i < len(r.b) && r.b[i] >= '0' && r.b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(r.b) && r.b[i] == '-' {
		i++
	}
	switch {
	case i < len(r.b) && r.b[i] == '0':
		i++
	case digits() == 0:
		r.i = i
		r.fail("invalid number")
		return nil
	}
	if i < len(r.b) && r.b[i] == '.' {
		i++
		if digits() == 0 {
			r.i = i
			r.fail("invalid number")
			return nil
		}
	}
	if i < len(r.b) && (r.b[i] == 'e' || r.b[i] == 'E') {
		i++
		if i < len(r.b) && (r.b[i] == '+' || r.b[i] == '-') {
			i++
		}
		if digits() == 0 {
			r.i = i
			r.fail("invalid number")
			return nil
		}
	}
	r.i = i
	return r.b[start:i]
}

// plain marks the bytes that may stand for themselves in a string without
// further looking: printable ASCII but the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// quoted reads a string and returns it with its quotes; verbatim says
// that its contents are the string itself (no escapes, valid UTF-8).
func (r *reader) quoted() (q []byte, verbatim bool) {
	start := r.i
	verbatim = true
	ascii := true
	i := r.i + 1
	for {
		for i < len(r.b) && plain[r.b[i]] {
			i++
		}
		if i == len(r.b) {
			r.i = i
			r.fail("unexpected end of JSON in a string")
			return r.b[start:i:i], false
		}
		switch c := r.b[i]; {
		case c == '"':
			r.i = i + 1
			q = r.b[start:r.i:r.i]
			if !ascii && verbatim {
				verbatim = utf8.Valid(q)
			}
			return q, verbatim
		case c == '\\':
			verbatim = false
			n := 2
			if i+1 < len(r.b) && r.b[i+1] == 'u' {
				n = 6
			}
			if len(r.b)-i < n || !escape(r.b[i:i+n]) {
				r.i = i
				r.fail("invalid escape in a string")
				return r.b[start:i:i], false
			}
			i += n
		case c < ' ':
			r.i = i
			r.fail("control character %q in a string", c)
			return r.b[start:i:i], false
		default:
			ascii = false
			i++
		}
	}
}

// escape checks \" \\ \/ \b \f \n \r \t or \uXXXX.
func escape(e []byte) bool {
	switch e[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		for _, c := range e[2:] {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
		return true
	}
	return false
}

// unquote appends the contents of q, a string that quoted found
// well-formed. All AppendUnquote can still object to is invalid UTF-8 or
// an unpaired surrogate, which it replaces with U+FFFD, as DecodeJSON
// does.
func unquote(dst, q []byte) []byte {
	dst, _ = jsontext.AppendUnquote(dst, q)
	return dst
}
