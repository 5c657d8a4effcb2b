package gateway

import (
	"fmt"
	"strconv"
	"strings"
)

// ValidateRate checks a ceiling written as N/s, N/m or N/h.
func ValidateRate(s string) error {
	n, unit, ok := strings.Cut(s, "/")
	v, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || v < 1 || (unit != "s" && unit != "m" && unit != "h") {
		return fmt.Errorf("rate limit %q must look like 7200/h, 120/m or 10/s", s)
	}
	return nil
}
