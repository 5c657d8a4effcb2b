package webhooksig_test

import (
	"testing"

	"github.com/practicegw/practicegw/adapters/kit/webhooksig"
	"github.com/practicegw/practicegw/adapters/vendortest"
)

func TestValidHMAC(t *testing.T) {
	body := []byte(`{"events":[]}`)
	key := "webhook-key"
	good := vendortest.SignXero(key, body)
	hexSig := vendortest.SignKarbon(key, body)
	cases := []struct {
		name string
		key  string
		sig  string
		ok   bool
	}{
		{"base64", key, good, true},
		{"hex", key, hexSig, true},
		{"wrong key", "other", good, false},
		{"empty signature", key, "", false},
		{"no key configured", "", good, false},
		{"truncated", key, good[:10], false},
		{"garbage", key, "not a signature", false},
	}
	for _, tc := range cases {
		if got := webhooksig.ValidHMAC([]byte(tc.key), body, tc.sig); got != tc.ok {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.ok)
		}
	}
	if webhooksig.ValidHMAC([]byte(key), []byte(`{"events":[{}]}`), good) {
		t.Error("a signature of another body passed")
	}
}
