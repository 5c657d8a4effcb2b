package vendortest

import (
	"net/http"
	"net/http/httptest"
)

// Serve is an http.RoundTripper that answers each request with the double
// serving its host ("127.0.0.1:port" of the double's URL), in the caller's
// goroutine and without a connection: what a simulation on a fake clock
// (testing/synctest) needs, since a socket read is not a wait it can
// skip. Each request is counted under the double's name.
type Serve struct {
	Hosts map[string]http.Handler
	// Observe, when set, is told of each request with the double's host.
	Observe func(host string, r *http.Request)
}

// RoundTrip serves r with the double of its host.
func (s Serve) RoundTrip(r *http.Request) (*http.Response, error) {
	h, ok := s.Hosts[r.URL.Host]
	if !ok {
		return nil, &hostError{r.URL.Host}
	}
	if s.Observe != nil {
		s.Observe(r.URL.Host, r)
	}
	in := r.Clone(r.Context())
	in.RequestURI = r.URL.RequestURI()
	in.RemoteAddr = "127.0.0.1:1"
	if in.Body == nil {
		in.Body = http.NoBody
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, in)
	resp := w.Result()
	resp.Request = r
	return resp, nil
}

type hostError struct{ host string }

func (e *hostError) Error() string { return "vendortest: no double serves " + e.host }

// Handler is the Karbon double's handler, as its server runs it.
func (k *Karbon) Handler() http.Handler { return k.srv.Config.Handler }

// Handler is the Xero double's handler, as its server runs it.
func (x *Xero) Handler() http.Handler { return x.srv.Config.Handler }

// Handler is the XPM double's handler, as its server runs it.
func (x *XPM) Handler() http.Handler { return x.srv.Config.Handler }

// Handler is the Graph double's handler, as its server runs it.
func (g *Graph) Handler() http.Handler { return g.srv.Config.Handler }
