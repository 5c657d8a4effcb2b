package auth

import (
	"context"

	"github.com/practicegw/practicegw/store/credential"
)

type ctxKey struct{}

// WithCredential returns ctx carrying the authenticated credential.
func WithCredential(ctx context.Context, c *credential.Credential) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// FromContext returns the credential that authenticated the request.
func FromContext(ctx context.Context) (*credential.Credential, bool) {
	c, ok := ctx.Value(ctxKey{}).(*credential.Credential)
	return c, ok
}
