package client

import (
	"context"
	"net/http"
)

// WithToken sends token, a credential's pgw_live_… or pgw_test_… token,
// as the bearer credential of every request.
func WithToken(token string) ClientOption {
	return WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	})
}
