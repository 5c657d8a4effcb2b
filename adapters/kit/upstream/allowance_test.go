package upstream_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

// A configured daily_limit replaces the vendor's published day, and a
// negative one drops it; the rate stays.
func TestConfiguredDailyLimit(t *testing.T) {
	xeroDay := []upstream.Allowance{{Limit: 5000, Per: 24 * time.Hour}}
	for _, c := range []struct {
		daily int
		want  string
	}{
		{0, "[{60 1m0s} {5000 24h0m0s}]"},
		{1_000_000, "[{60 1m0s} {1000000 24h0m0s}]"},
		{-1, "[{60 1m0s}]"},
	} {
		client, err := upstream.NewClient(upstream.Options{System: "xero", BaseURL: "https://api.xero.example",
			Policy:   upstream.Policy{DailyLimit: c.daily},
			Defaults: upstream.Policy{RateLimit: 60, RatePeriod: upstream.Duration(time.Minute)}, Allowances: xeroDay}, upstream.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(client.Allowances()); got != c.want {
			t.Errorf("daily_limit %d: allowances %s, want %s", c.daily, got, c.want)
		}
	}
}
