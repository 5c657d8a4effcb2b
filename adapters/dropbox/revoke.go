package dropbox

import (
	"context"
	"fmt"
	"net/http"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

// Revoke revokes the access token c sends, and with it the grant its
// refresh token came from (POST /2/auth/token/revoke, no body); revokeURL
// is that endpoint on c's origin.
func Revoke(ctx context.Context, c *upstream.Client, revokeURL string) error {
	if _, err := c.Do(ctx, upstream.Request{Method: http.MethodPost, Path: revokeURL}); err != nil {
		return fmt.Errorf("dropbox: revoke the token: %w", err)
	}
	return nil
}
