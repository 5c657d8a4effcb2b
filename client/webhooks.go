package client

import (
	"encoding/json"
	"fmt"
	"net/http"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// VerifyWebhook checks a webhook delivery as Standard Webhooks says, with
// the endpoint's whsec_… secret: one of its webhook-signature values signs
// webhook-id, webhook-timestamp and the body, and the timestamp is within
// five minutes of now (an old delivery replayed is refused). It answers
// the delivery's event, whose Discriminator is the event name it was sent
// under. Verify the body exactly as received, before decoding it.
func VerifyWebhook(secret string, header http.Header, body []byte) (Event, error) {
	var ev Event
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return ev, fmt.Errorf("practicegw: the webhook secret: %w", err)
	}
	if err := wh.Verify(body, header); err != nil {
		return ev, fmt.Errorf("practicegw: the delivery's signature: %w", err)
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return ev, fmt.Errorf("practicegw: reading the delivery: %w", err)
	}
	return ev, nil
}
