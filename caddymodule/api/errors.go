package api

import (
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/practice"
)

// toAPIError answers err from the one error table; an error the table
// does not know is logged and answered as an internal error.
func (h *Handler) toAPIError(r *http.Request, err error) *apierror.Error {
	if e, ok := apierror.From(err); ok {
		return e
	}
	h.logger.Error("request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
	return apierror.Internal()
}

func notFound(k practice.Kind, id string) *apierror.Error {
	return apierror.New(http.StatusNotFound, "resource_not_found", fmt.Sprintf("No such %s: %q.", k.Singular(), id)).WithParam("id")
}
