package upstream

import "time"

// Booked is Allowance.booked, for the tests of the budget's windows.
func Booked(a Allowance) (int, time.Duration) { return a.booked() }
