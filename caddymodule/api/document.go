package api

import (
	"fmt"
)

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
