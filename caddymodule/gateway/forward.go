package gateway

import (
	"errors"
	"net/http"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/cluster"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/credential"
)

// Forward is the cluster's: a request for a firm held elsewhere is
// answered through one of its holders (false when this instance answers
// it). A write whose holder went away while answering is answered here
// with 503 rather than made twice.
func (a *App) Forward(w http.ResponseWriter, r *http.Request, cred *credential.Credential, k practice.Kind) bool {
	if a.cluster == nil {
		return false
	}
	done, err := a.cluster.Forward(w, r, cred, k)
	if errors.Is(err, cluster.ErrHolderGone) {
		apierror.Write(w, r, apierror.New(http.StatusServiceUnavailable, "upstream_unavailable",
			"The instance holding this firm's records went away while answering; retry the request (with its Idempotency-Key, if it is a write).").
			WithHeader("Retry-After", "1"))
		return true
	}
	return done
}

// Forwarded reads a request another instance forwarded (cluster.Forwarded).
func (a *App) Forwarded(r *http.Request) (*http.Request, *credential.Credential, error) {
	return a.cluster.Forwarded(r)
}
