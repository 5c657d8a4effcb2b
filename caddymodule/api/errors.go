package api

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/upstream"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/apierror"
	"github.com/practicegw/practicegw/internal/practice"
)

// toAPIError is the one table from domain errors to status and code.
func (h *Handler) toAPIError(r *http.Request, err error) *apierror.Error {
	var apiErr *apierror.Error
	var invalid *practice.InvalidError
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &invalid):
		status := http.StatusBadRequest
		if invalid.Code == "invalid_stage" {
			status = http.StatusUnprocessableEntity
		}
		return apierror.New(status, invalid.Code, invalid.Message).WithParam(invalid.Param)
	case errors.Is(err, practice.ErrNotFound):
		return apierror.New(http.StatusNotFound, "resource_not_found", "No such record.")
	case errors.Is(err, dispatcher.ErrTooManyEndpoints):
		return apierror.New(http.StatusConflict, "conflict",
			"This firm has as many webhook endpoints in this mode as it may have; delete one it no longer uses first.")
	case errors.Is(err, practice.ErrConflict):
		return apierror.New(http.StatusConflict, "conflict", "The record changed while this request was applied; fetch it and try again.")
	case errors.Is(err, practice.ErrUnavailable):
		retry := 30 * time.Second
		if d, ok := upstream.RetryAfter(err); ok {
			retry = d
		}
		return apierror.New(http.StatusServiceUnavailable, "upstream_unavailable",
			"The firm's system behind this route is unavailable; try again shortly.").
			WithHeader("Retry-After", strconv.Itoa(int(math.Ceil(max(retry, time.Second).Seconds()))))
	case errors.Is(err, practice.ErrBadUpstream):
		return apierror.New(http.StatusBadGateway, "upstream_unavailable",
			"The firm's system behind this route answered with something unreadable; try again shortly.")
	}
	h.logger.Error("request failed", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.Error(err))
	return apierror.New(http.StatusInternalServerError, "internal_error",
		"Something went wrong on our side; the request id helps us find it.")
}

func notFound(k practice.Kind, id string) *apierror.Error {
	return apierror.New(http.StatusNotFound, "resource_not_found", fmt.Sprintf("No such %s: %q.", k.Singular(), id)).WithParam("id")
}
