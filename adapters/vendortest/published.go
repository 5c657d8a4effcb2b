package vendortest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// The doubles check every request they receive against the vendor's
// published OpenAPI description in shared/vendor-apis, so a test that
// makes an adapter send something the vendor does not publish fails,
// whatever the double itself would have accepted. kin-openapi reads the
// descriptions (OpenAPI 3.0 and 3.1) and validates each request: its
// operation (path template and method), its parameters against their
// schemas (type, enum, bounds; required ones present) and its body against
// the operation's requestBody. Parameters the operation does not declare
// are refused here, which kin-openapi leaves alone.
//
// The descriptions are the vendors', not the project's, so they stay out
// of the repository: a clone with nothing beside it has none. There the
// doubles serve as ever and only the check is skipped, said once per test
// process; where vendorAPIsEnv names a folder (CI's .ci/run does), a
// description missing from it fails the test instead.

// vendorAPIsEnv names a folder holding the vendors' descriptions, when it
// is not shared/vendor-apis beside the module's root (where CI clones it).
const vendorAPIsEnv = "PRACTICEGW_VENDOR_APIS"

// errNoDescriptions is that neither vendorAPIsEnv nor the folder beside
// the module names the descriptions: the one case in which requests go
// unchecked rather than fail the test.
var errNoDescriptions = errors.New("the vendors' published API descriptions are not here")

// Unchecked is the one line that says requests to the doubles go
// unchecked, when they do: no folder of descriptions is named and none
// is beside the module (make test prints it, through practicegw-vendors
// -unchecked); "" when they are checked, or when a folder named lacks a
// description, which fails the tests instead.
func Unchecked() string {
	if _, err := vendorAPIsDir(); errors.Is(err, errNoDescriptions) {
		return uncheckedLine(err)
	}
	return ""
}

// uncheckedLine is what a test process says, once, when requests go
// unchecked.
func uncheckedLine(err error) string {
	return fmt.Sprintf("requests to the vendor doubles are not checked against the vendors' published APIs (%v); set %s to the folder of their descriptions to check them",
		err, vendorAPIsEnv)
}

// The published descriptions the doubles check requests against.
const (
	karbonDescription       = "karbon-api-v3.openapi.json"
	xeroDescription         = "xero-accounting.openapi.yaml"
	xeroWebhooksDescription = "xero-webhooks.openapi.yaml"
)

// published is one vendor description, loaded once per process.
type published struct {
	file   string
	doc    *openapi3.T
	router routers.Router
	// server is where the description says the API is; requests to a
	// double are routed as if sent there.
	server *url.URL
	// repairs lists what had to be changed for the description to load.
	repairs []string
	// quirks are validation settings where a vendor's own description
	// contradicts what the vendor sends.
	quirks []openapi3.SchemaValidationOption
}

var descriptions sync.Map // file name -> func() (*published, error)

// loadPublished reads a description from the vendor-apis folder, once.
func loadPublished(file string) (*published, error) {
	load, _ := descriptions.LoadOrStore(file, sync.OnceValues(func() (*published, error) {
		dir, err := vendorAPIsDir()
		if err != nil {
			return nil, err
		}
		return readPublished(filepath.Join(dir, file))
	}))
	return load.(func() (*published, error))()
}

// vendorAPIsDir finds shared/vendor-apis: vendorAPIsEnv, else beside the
// root of the module the tests run in.
func vendorAPIsDir() (string, error) {
	if dir := os.Getenv(vendorAPIsEnv); dir != "" {
		return dir, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			apis := filepath.Join(dir, "..", "shared", "vendor-apis")
			if _, err := os.Stat(apis); err != nil {
				return "", fmt.Errorf("%w: none at %s", errNoDescriptions, filepath.Clean(apis))
			}
			return apis, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: no go.mod above the working directory to look beside", errNoDescriptions)
		}
		dir = parent
	}
}

func readPublished(path string) (*published, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := &published{file: filepath.Base(path)}
	if strings.HasSuffix(path, ".json") {
		if raw, p.repairs, err = repairJSON(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", p.file, err)
		}
	}
	loader := openapi3.NewLoader()
	if p.doc, err = loader.LoadFromData(raw); err != nil {
		return nil, fmt.Errorf("%s: %w", p.file, err)
	}
	if len(p.doc.Servers) == 0 {
		return nil, fmt.Errorf("%s names no server", p.file)
	}
	if p.server, err = url.Parse(p.doc.Servers[0].URL); err != nil {
		return nil, fmt.Errorf("%s: server: %w", p.file, err)
	}
	if p.file == xeroWebhooksDescription {
		// Xero's webhook events carry eventDateUtc as UTC without a zone
		// ("2024-06-21T01:15:39.902", the description's own example),
		// which its "format: date-time" (RFC 3339) would refuse.
		p.quirks = append(p.quirks, openapi3.WithStringFormatValidator("date-time",
			openapi3.NewRegexpFormatValidator(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?$`)))
	}
	if p.doc.Paths != nil && p.doc.Paths.Len() > 0 {
		if p.router, err = gorillamux.NewRouter(p.doc); err != nil {
			return nil, fmt.Errorf("%s: routes: %w", p.file, err)
		}
	}
	return p, nil
}

// repairJSON makes the smallest change that lets a description load:
// Karbon's marks some properties `"required": true`, a Swagger 2 habit
// that is not JSON Schema (where required is a list on the object), and
// kin-openapi rightly refuses it. Those keywords are dropped, as a
// validator that ignored them would: BusinessCardRequest.BusinessCardKey,
// one of them, cannot be required of a new contact's first card, which has
// no key yet. Each repair is listed.
func repairJSON(raw []byte) ([]byte, []string, error) {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, err
	}
	var repairs []string
	var walk func(n any, path string)
	walk = func(n any, path string) {
		switch v := n.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				for name, prop := range props {
					if m, ok := prop.(map[string]any); ok {
						if r, ok := m["required"]; ok {
							if _, list := r.([]any); !list {
								delete(m, "required")
								repairs = append(repairs, path+"/properties/"+name+": dropped \"required\": "+fmt.Sprint(r))
							}
						}
					}
				}
			}
			for k, x := range v {
				walk(x, path+"/"+strings.ReplaceAll(k, "/", "~1"))
			}
		case []any:
			for i, x := range v {
				walk(x, fmt.Sprintf("%s/%d", path, i))
			}
		}
	}
	walk(doc, "#")
	slices.Sort(repairs)
	out, err := json.Marshal(doc)
	return out, repairs, err
}

// check says what in a request the description does not allow; nil is a
// request the vendor publishes. A vendorLink (a next link the double
// handed out) is checked for its operation only: its parameters are the
// vendor's, not the adapter's.
func (p *published) check(r *http.Request, body []byte, vendorLink bool) error {
	if p.router == nil {
		return fmt.Errorf("%s publishes no paths, only webhooks", p.file)
	}
	u := *r.URL
	u.Scheme, u.Host = p.server.Scheme, p.server.Host
	req := r.Clone(context.Background())
	req.URL, req.Host, req.RequestURI = &u, p.server.Host, ""
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	route, params, err := p.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%s %s is no operation of %s", r.Method, r.URL.Path, p.file)
	}
	if vendorLink {
		return nil
	}
	var problems []string
	for name := range r.URL.Query() {
		if declared(route, name) == nil {
			problems = append(problems, fmt.Sprintf("query parameter %q is not declared for %s %s", name, route.Method, route.Path))
		}
	}
	err = openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route, Options: p.options(),
	})
	var multi openapi3.MultiError
	switch {
	case errors.As(err, &multi):
		for _, e := range multi {
			problems = append(problems, e.Error())
		}
	case err != nil:
		problems = append(problems, err.Error())
	}
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	return errors.New(strings.Join(problems, "; "))
}

// options are kin-openapi's settings for checking a request.
func (p *published) options() *openapi3filter.Options {
	opts := &openapi3filter.Options{
		AuthenticationFunc:      openapi3filter.NoopAuthenticationFunc, // the doubles check credentials themselves
		SkipSettingDefaults:     true,                                  // Karbon's $orderby defaults lie outside their own enums
		MultiError:              true,
		SchemaValidationOptions: p.quirks,
	}
	// One line per problem, where it is and why, rather than the schema.
	opts.WithCustomSchemaErrorFunc(func(e *openapi3.SchemaError) string {
		msg := strings.Join(strings.Fields(e.Reason), " ")
		if e.Origin != nil && strings.HasPrefix(msg, "doesn't match") {
			// allOf, anyOf, oneOf: the reasons are in the parts.
			msg += ": " + e.Origin.Error()
		}
		if ptr := e.JSONPointer(); len(ptr) > 0 {
			msg = "at /" + strings.Join(ptr, "/") + ": " + msg
		}
		return msg
	})
	return opts
}

// checkScopes says whether a token granted scopes may make r, by the
// security requirement of its operation (else the description's). Xero's
// descriptions list, for each operation, the scopes of which any one
// admits it (practicemanager, practicemanager.read,
// practicemanager.client, ...), so that is how they are read here.
func (p *published) checkScopes(r *http.Request, granted []string) error {
	u := *r.URL
	u.Scheme, u.Host = p.server.Scheme, p.server.Host
	req := r.Clone(context.Background())
	req.URL, req.Host, req.RequestURI = &u, p.server.Host, ""
	route, _, err := p.router.FindRoute(req)
	if err != nil {
		return nil // check() says so
	}
	reqs := p.doc.Security
	if route.Operation.Security != nil {
		reqs = *route.Operation.Security
	}
	var admits []string
	for _, req := range reqs {
		for _, scopes := range req {
			for _, s := range scopes {
				if slices.Contains(granted, s) {
					return nil
				}
				admits = append(admits, s)
			}
		}
	}
	if len(admits) == 0 {
		return nil
	}
	return fmt.Errorf("the token's grant (%s) holds none of the scopes %s %s takes: %s",
		strings.Join(granted, " "), route.Method, route.Path, strings.Join(admits, ", "))
}

// declared finds a query parameter of the route's operation or path.
func declared(route *routers.Route, name string) *openapi3.Parameter {
	if p := route.Operation.Parameters.GetByInAndName(openapi3.ParameterInQuery, name); p != nil {
		return p
	}
	return route.PathItem.Parameters.GetByInAndName(openapi3.ParameterInQuery, name)
}

// checkWebhook says what in a webhook body the description's webhook
// (OpenAPI 3.1 webhooks) does not allow.
func (p *published) checkWebhook(name string, body []byte) error {
	item := p.doc.Webhooks[name]
	if item == nil || item.Post == nil || item.Post.RequestBody == nil {
		return fmt.Errorf("%s publishes no webhook %q", p.file, name)
	}
	req, _ := http.NewRequest(http.MethodPost, p.server.String(), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	opts := p.options()
	// Karbon marks every field of its webhook payloads readOnly: sent by
	// Karbon, never written by a client, which is what a webhook is.
	opts.ExcludeReadOnlyValidations = true
	// The route tells kin-openapi the description's version (3.1: JSON
	// Schema 2020-12, with const).
	route := &routers.Route{Spec: p.doc, PathItem: item, Method: http.MethodPost, Operation: item.Post}
	return openapi3filter.ValidateRequestBody(context.Background(), &openapi3filter.RequestValidationInput{
		Request: req, Route: route, Options: opts,
	}, item.Post.RequestBody.Value)
}

// conformance is a double's record of the requests it received that its
// vendor's description does not allow.
type conformance struct {
	// checker is what requests are checked against: desc, or another
	// vendor's published definition (QuickBooks' schemas).
	checker requestChecker
	desc    *published
	loadErr error

	mu         sync.Mutex
	violations []string
	// links are the next links the double handed out, as request URIs.
	links map[string]bool
	// granted, when set, are the scopes of the grant a request's access
	// token belongs to (false: a token of no grant, such as the double's
	// fixed one), checked against the operation's security requirement.
	granted func(*http.Request) ([]string, bool)
}

// requestChecker says what in a request a vendor's published definition
// does not allow (nil: nothing), and names that definition.
type requestChecker interface {
	check(r *http.Request, body []byte, vendorLink bool) error
	name() string
}

func (p *published) name() string { return p.file }

func newConformance(file string) *conformance {
	d, err := loadPublished(file)
	c := &conformance{desc: d, loadErr: err, links: map[string]bool{}}
	if d != nil {
		c.checker = d
	}
	return c
}

// wrap checks each request before h answers it, faults included: what the
// adapter sent is the question, not what the double answers.
func (c *conformance) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.checker != nil {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			c.mu.Lock()
			link := c.links[r.URL.RequestURI()]
			c.mu.Unlock()
			err := c.checker.check(r, body, link)
			if scopes, ok := c.grantedTo(r); ok && err == nil && c.desc != nil {
				err = c.desc.checkScopes(r, scopes)
			}
			if err != nil {
				c.mu.Lock()
				c.violations = append(c.violations, r.Method+" "+r.URL.RequestURI()+": "+strings.Join(strings.Fields(err.Error()), " "))
				c.mu.Unlock()
			}
		}
		h.ServeHTTP(w, r)
	})
}

func (c *conformance) grantedTo(r *http.Request) ([]string, bool) {
	if c.granted == nil {
		return nil, false
	}
	return c.granted(r)
}

// handOut notes a next link the double gives, absolute or not.
func (c *conformance) handOut(link string) {
	u, err := url.Parse(link)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.links[u.RequestURI()] = true
}

// Violations lists the requests received so far that the vendor's
// published description does not allow, each with why.
func (c *conformance) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.violations...)
}

// saidUnchecked makes a test process say once, not in every test, that
// requests go unchecked.
var saidUnchecked sync.Once

// Conforms fails t at its end when any request broke the vendor's
// description, and at once when the description could not be read from
// where it was looked for. With no descriptions anywhere (a clone with
// nothing beside it) requests go unchecked, which the first test of the
// process to ask logs in one line.
func (c *conformance) Conforms(t testing.TB) {
	t.Helper()
	if errors.Is(c.loadErr, errNoDescriptions) {
		saidUnchecked.Do(func() { t.Log(uncheckedLine(c.loadErr)) })
		return
	}
	if c.loadErr != nil {
		t.Fatalf("requests cannot be checked against the vendor's published API: %v", c.loadErr)
	}
	t.Cleanup(func() {
		for _, v := range c.Violations() {
			t.Errorf("request not in %s: %s", c.checker.name(), v)
		}
	})
}

// note records a violation the double found itself (an answer of its
// own that the vendor's definition does not allow).
func (c *conformance) note(v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violations = append(c.violations, v)
}
