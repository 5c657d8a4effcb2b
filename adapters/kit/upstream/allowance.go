package upstream

import "time"

// Allowances are the vendor account's limits this client keeps to: its
// rate (Karbon's 120 a minute) and the further allowances (Xero's 5,000
// a day) and those the vendor meters (Options.Metered), so that what
// spends them can plan (the read model's sync). None when the budget is
// turned off.
func (c *Client) Allowances() []Allowance {
	if c.p.RateLimit <= 0 || c.p.RatePeriod <= 0 {
		return nil
	}
	out := []Allowance{{Limit: c.p.RateLimit, Per: time.Duration(c.p.RatePeriod)}}
	for _, a := range c.allowances {
		out = append(out, a.Allowance)
	}
	return append(out, c.metered...)
}

// BudgetAccount names the vendor account whose allowances the client
// spends: two clients with the same name (Xero Practice Manager and the
// Xero ledger of one organisation) share them. It is a digest, never a
// credential.
func (c *Client) BudgetAccount() string { return c.budgetKey }

// dailyLimit applies a configured daily limit to the published
// allowances: it replaces the published day's, or adds one; negative
// drops it.
func dailyLimit(published []Allowance, configured int) []Allowance {
	if configured == 0 {
		return published
	}
	var out []Allowance
	for _, a := range published {
		if a.Per != 24*time.Hour {
			out = append(out, a)
		}
	}
	if configured > 0 {
		out = append(out, Allowance{Limit: configured, Per: 24 * time.Hour})
	}
	return out
}
