package client

import (
	"net/http"
	"strconv"
	"time"

	"github.com/dunglas/httpsfv"
)

// RateLimit is what an answer says of its credential's ceiling, in the
// IETF RateLimit header fields every answer carries:
// RateLimit-Policy: "default";q=7200;w=3600 and RateLimit: "default";r=7182;t=1.
type RateLimit struct {
	Policy    string        // the policy's name
	Limit     int64         // q: requests in each window
	Window    time.Duration // w
	Remaining int64         // r: requests left now
	Reset     time.Duration // t: until the quota is whole again
}

// RateLimitOf reads the answer's rate-limit headers; false when it has
// none it can read.
func RateLimitOf(h http.Header) (RateLimit, bool) {
	var rl RateLimit
	limit, ok := firstItem(h, "RateLimit")
	if !ok {
		return rl, false
	}
	rl.Policy, _ = limit.Value.(string)
	rl.Remaining, ok = param(limit, "r")
	if !ok {
		return rl, false
	}
	reset, _ := param(limit, "t")
	rl.Reset = time.Duration(reset) * time.Second
	if policy, ok := firstItem(h, "RateLimit-Policy"); ok {
		rl.Limit, _ = param(policy, "q")
		window, _ := param(policy, "w")
		rl.Window = time.Duration(window) * time.Second
	}
	return rl, true
}

// RetryAfter reads Retry-After, in seconds (as the gateway sends it) or as
// an HTTP date; false when the answer has none.
func RetryAfter(h http.Header) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(time.Until(at), 0), true
	}
	return 0, false
}

// firstItem is the first item of a structured list header.
func firstItem(h http.Header, name string) (httpsfv.Item, bool) {
	list, err := httpsfv.UnmarshalList(h.Values(name))
	if err != nil || len(list) == 0 {
		return httpsfv.Item{}, false
	}
	item, ok := list[0].(httpsfv.Item)
	return item, ok
}

func param(item httpsfv.Item, key string) (int64, bool) {
	if item.Params == nil {
		return 0, false
	}
	v, ok := item.Params.Get(key)
	n, isInt := v.(int64)
	return n, ok && isInt
}
