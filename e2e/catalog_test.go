package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// eventCatalog is the event catalog of the OpenAPI document (its
// webhooks): the schema of each event name and the headers a delivery of
// it must carry. Every delivery a receiver gets is checked against it.
type eventCatalog struct {
	schemas map[string]*jsonschema.Schema
	headers map[string][]string
}

// served is the catalog of the binary under test, read from the document
// the first gateway to start serves: every gateway of one binary serves
// the same catalog.
var served struct {
	mu      sync.Mutex
	loaded  bool
	catalog *eventCatalog
	err     error
}

// loadCatalog reads the catalog from a served document, once.
func loadCatalog(doc []byte) {
	served.mu.Lock()
	defer served.mu.Unlock()
	if !served.loaded {
		served.catalog, served.err = readCatalog(doc)
		served.loaded = true
	}
}

// servedCatalog is the catalog loaded, or why there is none.
func servedCatalog() (*eventCatalog, error) {
	served.mu.Lock()
	defer served.mu.Unlock()
	if !served.loaded {
		return nil, fmt.Errorf("no gateway has served its document yet")
	}
	return served.catalog, served.err
}

// documentSchemas compiles the schemas of a served OpenAPI document, found
// by where they are in it.
type documentSchemas struct {
	doc any
	c   *jsonschema.Compiler
}

func compileDocument(doc []byte) (*documentSchemas, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("/v1/openapi.json", v); err != nil {
		return nil, err
	}
	return &documentSchemas{doc: v, c: c}, nil
}

// at compiles the schema at a path of keys into the document.
func (d *documentSchemas) at(path ...string) (*jsonschema.Schema, error) {
	ptr := "#"
	for _, k := range path {
		ptr += "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
	}
	return d.c.Compile("/v1/openapi.json" + ptr)
}

func readCatalog(doc []byte) (*eventCatalog, error) {
	d, err := compileDocument(doc)
	if err != nil {
		return nil, err
	}
	webhooks, _ := dig(d.doc, "webhooks").(map[string]any)
	if len(webhooks) == 0 {
		return nil, fmt.Errorf("the document has no webhooks")
	}
	params, _ := dig(d.doc, "components", "parameters").(map[string]any)
	cat := &eventCatalog{schemas: map[string]*jsonschema.Schema{}, headers: map[string][]string{}}
	for name, item := range webhooks {
		if cat.schemas[name], err = d.at("webhooks", name, "post", "requestBody", "content", "application/json", "schema"); err != nil {
			return nil, fmt.Errorf("webhook %s: %w", name, err)
		}
		list, _ := dig(item, "post", "parameters").([]any)
		for _, p := range list {
			if r, ok := dig(p, "$ref").(string); ok {
				p = params[strings.TrimPrefix(r, "#/components/parameters/")]
			}
			if dig(p, "in") == "header" && dig(p, "required") == true {
				cat.headers[name] = append(cat.headers[name], dig(p, "name").(string))
			}
		}
	}
	return cat, nil
}

// dig walks nested JSON objects.
func dig(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// names lists the catalog's event names.
func (c *eventCatalog) names() []string {
	var out []string
	for name := range c.schemas {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// checkDelivery validates one delivery's body against the catalog's schema
// for the event name it carries, and checks its headers.
func checkDelivery(h http.Header, body []byte) error {
	cat, err := servedCatalog()
	if err != nil {
		return fmt.Errorf("no event catalog to check against: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return err
	}
	name, _ := dig(v, "event").(string)
	schema, ok := cat.schemas[name]
	if !ok {
		return fmt.Errorf("%q is not in the catalog (%v)", name, cat.names())
	}
	for _, header := range cat.headers[name] {
		if h.Get(header) == "" {
			return fmt.Errorf("%s: no %s header", name, header)
		}
	}
	if err := schema.Validate(v); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	return nil
}
