package dispatcher

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks headers (https://www.standardwebhooks.com).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

const secretPrefix = "whsec_"

// Sign returns the webhook-signature header value: one "v1,<base64
// HMAC-SHA256>" entry per key, space-separated, over "id.timestamp.body".
// Keys are "whsec_<base64>"; the HMAC key is the decoded base64.
func Sign(keys []string, id string, ts time.Time, body []byte) (string, error) {
	if len(keys) == 0 {
		return "", errors.New("sign: no unexpired secret")
	}
	sigs := make([]string, 0, len(keys))
	for _, k := range keys {
		raw, err := decodeSecret(k)
		if err != nil {
			return "", err
		}
		mac := hmac.New(sha256.New, raw)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write(strconv.AppendInt(nil, ts.Unix(), 10))
		mac.Write([]byte{'.'})
		mac.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return strings.Join(sigs, " "), nil
}

func decodeSecret(key string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(key, secretPrefix))
	if err != nil {
		// The key itself must never reach a log line or an attempt error.
		return nil, errors.New("sign: a secret is not valid base64")
	}
	return raw, nil
}

// SignHeaders sets the three Standard Webhooks headers on h, as every
// delivery carries them: for anything else that signs as deliveries do
// (practicegw listen).
func SignHeaders(h http.Header, keys []string, id string, ts time.Time, body []byte) error {
	sig, err := Sign(keys, id, ts, body)
	if err != nil {
		return err
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return nil
}
