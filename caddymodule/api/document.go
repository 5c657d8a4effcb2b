package api

import (
	"fmt"
)

// OpenAPIDocument returns the OpenAPI 3.1 document that GET
// /v1/openapi.json serves for a gateway with the given deprecations, built
// from the same route table. The console's request explorer reads it
// in-process rather than fetching it over HTTP.
func OpenAPIDocument(deprecated []Deprecation) ([]byte, error) {
	notices, err := deprecationNotices(deprecated)
	if err != nil {
		return nil, err
	}
	return openAPIDocument(notices)
}

// deprecationNotices maps each deprecated route of the table to its notice.
func deprecationNotices(deprecated []Deprecation) (map[*route]Deprecation, error) {
	notices := map[*route]Deprecation{}
	for _, d := range deprecated {
		found := false
		for i := range routes {
			if routes[i].method == d.Method && routes[i].pattern == d.Path {
				notices[&routes[i]] = d
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("deprecated: no route %s %s", d.Method, d.Path)
		}
	}
	return notices, nil
}
