// Package usage is a credential's traffic counted per hour: what the rate
// limiter writes to a store, and what the console and the CLI show.
package usage

import "time"

// Retention is how long hourly counts are kept: the console shows a week,
// and a day more covers time zones and a late look.
const Retention = 8 * 24 * time.Hour

// Hour is one credential's requests in one hour (UTC), admitted and
// refused.
type Hour struct {
	Hour     time.Time `json:"hour"`
	Admitted int64     `json:"admitted"`
	Refused  int64     `json:"refused"`
}

// Traffic is a credential's hourly usage against its ceiling, as the
// console and the credential listings show it.
type Traffic struct {
	Ceiling  string `json:"ceiling"`
	Limit    int64  `json:"limit"`
	Window   int64  `json:"window_seconds"`
	Headroom int64  `json:"headroom"`
	Hours    []Hour `json:"hours"`
}
