package ratelimit

import "time"

// clockStart is where the limiter's clock starts in tests; it moves only
// when a test advances it.
var clockStart = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
