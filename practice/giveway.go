package practice

import "context"

type givingWay struct{}

// GivingWay marks the calls to vendors made under ctx as ones that can
// wait: a sync's polls, backfills and reconciliations, the safety net,
// give way to a notification's reads and clients' requests waiting for
// the same vendor allowance in this process (for a minute at most a
// call), so a burst of notifications is read in the allowance's first
// slots rather than behind a poll's.
func GivingWay(ctx context.Context) context.Context {
	return context.WithValue(ctx, givingWay{}, true)
}

// GivesWay reports whether ctx's calls give way (GivingWay).
func GivesWay(ctx context.Context) bool {
	v, _ := ctx.Value(givingWay{}).(bool)
	return v
}
