package vendortest

import (
	"net/http"
	"testing"
)

// KarbonConforming wraps h, a test's own handler of Karbon calls, with
// the check every Karbon double makes: t fails at its end if a request h
// received breaks Karbon's published description.
func KarbonConforming(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	c := newConformance(karbonDescription)
	c.Conforms(t)
	return c.wrap(h)
}
