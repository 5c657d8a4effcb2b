package dispatcher_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/dispatcher"
)

// The vector published with the Standard Webhooks reference libraries
// (libraries/go/webhook_test.go, TestWebhookSign, and the PHP, JavaScript
// and Rust equivalents).
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorPayload   = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignReproducesTheStandardWebhooksVector(t *testing.T) {
	got, err := dispatcher.Sign([]string{vectorSecret}, vectorID, time.Unix(vectorTimestamp, 0), []byte(vectorPayload))
	if err != nil {
		t.Fatal(err)
	}
	if got != vectorSignature {
		t.Fatalf("Sign = %s, want %s", got, vectorSignature)
	}
}

func TestIndependentVerifier(t *testing.T) {
	at := time.Unix(vectorTimestamp, 0)
	header := func(sig string) http.Header {
		h := http.Header{}
		h.Set("webhook-id", vectorID)
		h.Set("webhook-timestamp", "1614265330")
		h.Set("webhook-signature", sig)
		return h
	}
	other := "whsec_" + strings.Repeat("A", 43) + "="
	tests := []struct {
		name   string
		secret string
		header http.Header
		body   string
		now    time.Time
		ok     bool
	}{
		{"published vector", vectorSecret, header(vectorSignature), vectorPayload, at, true},
		{"vector among other entries", vectorSecret, header("v1a,AAAA v1,bm9wZQ== " + vectorSignature), vectorPayload, at, true},
		{"tampered body", vectorSecret, header(vectorSignature), `{"test": 2432232315}`, at, false},
		{"wrong secret", other, header(vectorSignature), vectorPayload, at, false},
		{"stale timestamp", vectorSecret, header(vectorSignature), vectorPayload, at.Add(6 * time.Minute), false},
		{"future timestamp", vectorSecret, header(vectorSignature), vectorPayload, at.Add(-6 * time.Minute), false},
		{"wrong version", vectorSecret, header(strings.Replace(vectorSignature, "v1,", "v2,", 1)), vectorPayload, at, false},
	}
	for _, tt := range tests {
		err := verifyStandardWebhook(tt.secret, tt.header, []byte(tt.body), tt.now)
		if (err == nil) != tt.ok {
			t.Errorf("%s: verify = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestSignWithSeveralKeysNewestFirst(t *testing.T) {
	at := time.Unix(vectorTimestamp, 0)
	got, err := dispatcher.Sign([]string{vectorSecret, vectorSecret}, vectorID, at, []byte(vectorPayload))
	if err != nil {
		t.Fatal(err)
	}
	if got != vectorSignature+" "+vectorSignature {
		t.Fatalf("Sign = %q", got)
	}
	if _, err := dispatcher.Sign(nil, vectorID, at, nil); err == nil {
		t.Fatal("Sign with no keys succeeded")
	}
	_, err = dispatcher.Sign([]string{"whsec_not base64!"}, vectorID, at, nil)
	if err == nil || strings.Contains(err.Error(), "not base64!") {
		t.Fatalf("bad key error %v leaks the key or is missing", err)
	}
}
