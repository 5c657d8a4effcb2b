package readmodel

import (
	"context"

	"github.com/practicegw/practicegw/practice"
)

// Purger drops a firm system's copy from a Store, when the firm
// disconnects the system: its records are the firm's data in a system it
// no longer uses, and a later connection of the same role must backfill
// afresh rather than resume from a checkpoint of another account.
type Purger interface {
	// Purge deletes every record and tombstone of kinds in firm's model
	// and the checkpoints named, writing nothing to the UpdateFeed (a
	// purge is no change of the firm's records: no one is told of it).
	// Purging what is not there is no error.
	Purge(ctx context.Context, firm string, kinds []practice.Kind, checkpoints []string) error
}

// SyncCheckpoints names the checkpoints the sync of a firm's role keeps:
// its progress, and a reconciliation asked for.
func SyncCheckpoints(firm, role string) []string {
	name := syncName(firm, role)
	return []string{name, name + resyncSuffix}
}

// syncName is the name of the sync of a firm's role: its lease and its
// checkpoint.
func syncName(firm, role string) string { return "sync/" + firm + "/" + role }

const resyncSuffix = "/resync"
