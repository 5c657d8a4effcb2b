package dispatcher_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// verifyStandardWebhook is a receiver's verifier written from the Standard
// Webhooks specification (spec/standard-webhooks.md, "Signature scheme" and
// "Verifying signatures"), deliberately sharing no code with the sender:
//
//   - the signed content is "{webhook-id}.{webhook-timestamp}.{body}";
//   - the key is the base64 part of "whsec_<base64>", decoded;
//   - webhook-signature is a space-delimited list of "<version>,<base64>";
//     symmetric signatures are version v1, HMAC-SHA256; any one matching
//     entry verifies; others (v1a, unknown versions) are ignored;
//   - comparison is constant time;
//   - the timestamp must be within a tolerance of the receiver's clock
//     (the reference libraries use five minutes).
func verifyStandardWebhook(secret string, header http.Header, body []byte, now time.Time) error {
	id := header.Get("webhook-id")
	ts := header.Get("webhook-timestamp")
	sigs := header.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook headers")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("bad timestamp %q", ts)
	}
	const tolerance = 5 * time.Minute
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("timestamp %s is outside the tolerance", time.Unix(sec, 0).UTC())
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return fmt.Errorf("bad secret: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	expected := mac.Sum(nil)
	for _, entry := range strings.Split(sigs, " ") {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		if hmac.Equal(got, expected) {
			return nil
		}
	}
	return errors.New("no matching signature")
}
