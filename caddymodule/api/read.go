package api

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/practice"
)

const (
	defaultLimit = 50
	maxLimit     = 200
)

func (h *Handler) list(w http.ResponseWriter, r *http.Request, c *call) error {
	q, err := h.query(c, r.URL.RawQuery)
	if err != nil {
		return err
	}
	tombstones, err := wantsTombstones(q.params)
	if err != nil {
		return err
	}
	for name, v := range q.params {
		if err := applyFilter(&q.Filter, findParam(c.route.query, name), v); err != nil {
			return err
		}
	}
	reader := c.backends.Reader(c.route.kind)
	page, err := reader.List(r.Context(), c.tenant, c.route.kind, q.Query)
	if err != nil {
		return err
	}
	if tombstones {
		if page, err = withTombstones(r.Context(), reader, c.tenant, c.route.kind, q.Query, page); err != nil {
			return err
		}
	}
	writeFreshness(w, reader, c.route.kind)
	buf := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(buf)
	buf.Reset()
	buf.WriteString(`{"object":"list","data":[`)
	for i, item := range page.Items {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(item)
	}
	buf.WriteString(`],"has_more":`)
	if page.HasMore {
		buf.WriteString(`true,"next_cursor":"`)
		buf.WriteString(h.nextCursor(c, q, page.Next))
		buf.WriteString("\"}\n")
	} else {
		buf.WriteString("false,\"next_cursor\":null}\n")
	}
	writeRead(w, r, buf.Bytes())
	return nil
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, c *call) error {
	if r.URL.RawQuery != "" {
		if err := noQuery(r.URL.RawQuery); err != nil {
			return err
		}
	}
	reader := c.backends.Reader(c.route.kind)
	body, err := reader.Get(r.Context(), c.tenant, c.route.kind, c.id)
	if errors.Is(err, practice.ErrNotFound) {
		return notFound(c.route.kind, c.id)
	}
	if err != nil {
		return err
	}
	writeFreshness(w, reader, c.route.kind)
	writeRead(w, r, append(body, '\n'))
	return nil
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

var jsonContentType = []string{"application/json"}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	hdr := w.Header()
	hdr["Content-Type"] = jsonContentType
	hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	w.Write(body)
}

// parsedQuery is a collection query: page size, the cursor's token, the
// validated filter parameters, and their fingerprint, which a cursor must
// match.
type parsedQuery struct {
	practice.Query
	params      map[string]string
	fingerprint uint32
	// cursor is the cursor parameter as sent, opened by Handler.query.
	cursor string
}

// time returns a validated date-time parameter, or the zero time.
func (q parsedQuery) time(name string) time.Time {
	t, _ := time.Parse(time.RFC3339, q.params[name])
	return t.UTC()
}

// parseQuery reads a collection's parameters strictly: unknown, repeated
// and malformed parameters are refused rather than ignored.
func parseQuery(rt *route, raw string) (parsedQuery, error) {
	q := parsedQuery{Query: practice.Query{Limit: defaultLimit}, fingerprint: noFilters}
	if raw == "" {
		return q, nil
	}
	values, err := url.ParseQuery(raw)
	if err != nil {
		return q, apierror.New(http.StatusBadRequest, "parameter_invalid", "The query string is not valid URL encoding.")
	}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	slices.Sort(names)
	var cursor string
	fp := sha256.New()
	for _, name := range names {
		p := findParam(rt.query, name)
		if p == nil {
			return q, apierror.New(http.StatusBadRequest, "parameter_unknown",
				fmt.Sprintf("%s does not accept the parameter %q; it accepts %s.", rt.pattern, name, paramNames(rt.query))).WithParam(name)
		}
		vals := values[name]
		if len(vals) != 1 {
			return q, invalidParam(name, "Send %s at most once.", name)
		}
		v := vals[0]
		switch p.typ {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxLimit {
				return q, invalidParam(name, "limit must be a whole number from 1 to %d.", maxLimit)
			}
			q.Limit = n
			continue
		case "cursor":
			cursor = v
			continue
		}
		if err := validateParam(p, v); err != nil {
			return q, err
		}
		if q.params == nil {
			q.params = map[string]string{}
		}
		q.params[name] = v
		fp.Write([]byte(name + "=" + v + "&"))
	}
	q.fingerprint = binary.BigEndian.Uint32(fp.Sum(nil))
	q.cursor = cursor
	return q, nil
}

// noFilters is the fingerprint of a query without filters.
var noFilters = func() uint32 { sum := sha256.Sum256(nil); return binary.BigEndian.Uint32(sum[:]) }()

func findParam(params []param, name string) *param {
	for i := range params {
		if params[i].name == name {
			return &params[i]
		}
	}
	return nil
}

func paramNames(params []param) string {
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

func noQuery(raw string) error {
	values, err := url.ParseQuery(raw)
	if err != nil {
		return apierror.New(http.StatusBadRequest, "parameter_invalid", "The query string is not valid URL encoding.")
	}
	for name := range values {
		return apierror.New(http.StatusBadRequest, "parameter_unknown",
			fmt.Sprintf("This route accepts no query parameters; %q is not one.", name)).WithParam(name)
	}
	return nil
}

func invalidParam(name, format string, args ...any) *apierror.Error {
	return apierror.New(http.StatusBadRequest, "parameter_invalid", fmt.Sprintf(format, args...)).WithParam(name)
}

// validateParam checks a filter value against its parameter's type.
func validateParam(p *param, v string) error {
	switch p.typ {
	case "enum":
		if !slices.Contains(p.enum, v) {
			return invalidParam(p.name, "%s must be one of %s.", p.name, strings.Join(p.enum, ", "))
		}
	case "id":
		if !strings.HasPrefix(v, p.prefix) || len(v) <= len(p.prefix) {
			return invalidParam(p.name, "%s must be an id starting %s.", p.name, p.prefix)
		}
	case "date":
		if _, err := time.Parse(time.DateOnly, v); err != nil {
			return invalidParam(p.name, "%s must be a date in the form YYYY-MM-DD.", p.name)
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339, v); err != nil {
			return invalidParam(p.name, "%s must be an RFC 3339 time such as 2026-03-01T09:00:00Z.", p.name)
		}
	case "boolean":
		if v != "true" && v != "false" {
			return invalidParam(p.name, "%s must be true or false.", p.name)
		}
	}
	return nil
}

// applyFilter sets a validated record filter.
func applyFilter(f *practice.Filter, p *param, v string) error {
	t, _ := time.Parse(time.RFC3339, v)
	t = t.UTC()
	switch p.name {
	case "updated_since":
		f.UpdatedSince = t
	case "owner":
		f.Owner = v
	case "status":
		f.Status = v
	case "last_activity_after":
		f.LastActivityAfter = t
	case "last_activity_before":
		f.LastActivityBefore = t
	case "stage":
		f.Stage = v
	case "client":
		f.Client = v
	case "deadline_after":
		f.DeadlineAfter = v
	case "deadline_before":
		f.DeadlineBefore = v
	default:
		return fmt.Errorf("filter %q has no field", p.name)
	}
	return nil
}

// cursors seals and opens paging cursors. A cursor carries the system's
// continuation token and a MAC over it, the tenant, the collection and a
// fingerprint of the filters, under a key every gateway instance shares:
// a cursor replayed against another query, another tenant or edited (a
// document store's token names the folder to read next) is refused rather
// than followed.
type cursors struct{ key []byte }

// cursorMAC is how much of the HMAC-SHA256 a cursor carries: forging one
// takes 2^128 tries.
const cursorMAC = 16

func (cs cursors) seal(scope, collection string, fingerprint uint32, token string) string {
	b := cs.mac(make([]byte, 0, cursorMAC+len(token)), scope, collection, fingerprint, token)
	return "cur_" + base64.RawURLEncoding.EncodeToString(append(b, token...))
}

func (cs cursors) open(scope, collection string, fingerprint uint32, cursor string) (string, error) {
	raw, ok := strings.CutPrefix(cursor, "cur_")
	if !ok {
		return "", apierror.InvalidCursor
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(raw)
	if err != nil || len(b) <= cursorMAC {
		return "", apierror.InvalidCursor
	}
	token := string(b[cursorMAC:])
	if !hmac.Equal(b[:cursorMAC], cs.mac(nil, scope, collection, fingerprint, token)) {
		return "", apierror.InvalidCursor
	}
	return token, nil
}

func (cs cursors) mac(dst []byte, scope, collection string, fingerprint uint32, token string) []byte {
	m := hmac.New(sha256.New, cs.key)
	m.Write([]byte(scope))
	m.Write([]byte{0})
	m.Write([]byte(collection))
	m.Write([]byte{0})
	m.Write(binary.BigEndian.AppendUint32(nil, fingerprint))
	m.Write([]byte(token))
	return m.Sum(dst)[:len(dst)+cursorMAC]
}

// query parses a collection's parameters and opens its cursor, which must
// be one this tenant was given for this collection and these filters.
func (h *Handler) query(c *call, raw string) (parsedQuery, error) {
	q, err := parseQuery(c.route, raw)
	if err != nil || q.cursor == "" {
		return q, err
	}
	q.Cursor, err = h.cursors.open(c.tenant.String(), c.route.pattern, q.fingerprint, q.cursor)
	return q, err
}

// nextCursor seals the cursor of the page after this one.
func (h *Handler) nextCursor(c *call, q parsedQuery, token string) string {
	return h.cursors.seal(c.tenant.String(), c.route.pattern, q.fingerprint, token)
}

// freshnessReader is a reader of copies kept in sync with a vendor (the
// read model), which says how fresh they are.
type freshnessReader interface {
	Freshness(k practice.Kind) (practice.Freshness, bool)
}

// writeFreshness tells the caller how fresh an answer from a read model
// is: Data-Confirmed-At, when its data was last confirmed against the
// vendor, and Data-State, the sync's state (live, backfilling, lagging,
// failing), so that a caller sees an answer is stale while a vendor is
// down; a failing one says why in Data-State-Reason. Answers from the demo records, which are their own system of
// record, carry neither.
func writeFreshness(w http.ResponseWriter, reader practice.Reader, k practice.Kind) {
	fr, ok := reader.(freshnessReader)
	if !ok {
		return
	}
	f, ok := fr.Freshness(k)
	if !ok {
		return
	}
	if !f.ConfirmedAt.IsZero() {
		w.Header().Set("Data-Confirmed-At", f.ConfirmedAt.UTC().Format(time.RFC3339))
	}
	w.Header().Set("Data-State", f.State)
	if f.State == "failing" && f.Reason != "" {
		w.Header().Set("Data-State-Reason", headerWords(f.Reason))
	}
}

// headerWords is a reason fit for a header: printable ASCII (an
// organisation's name may hold other letters, shown as ?), at most 200
// characters.
func headerWords(s string) string {
	b := make([]byte, 0, min(len(s), 200))
	for _, r := range s {
		if len(b) == 200 {
			break
		}
		if r < 0x20 || r > 0x7e {
			r = '?'
		}
		b = append(b, byte(r))
	}
	return string(b)
}
