package console

import (
	"cmp"
	"time"

	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// standing is a connection as the Systems page says it: one badge whose
// word is true of the connection and of the data it serves alike (never
// "connected" beside a failing sync), and the sentence that says why, in
// the administrator's words. The error chain behind a failure is the
// log's, never the page's.
type standing struct {
	// Class colours the badge: ok, warn, bad or idle.
	Class string
	// Word is the badge ("live", "failing", "needs reconnecting").
	Word string
	// Sentence says where the connection and its data stand.
	Sentence string
}

// standingOf reconciles c's status with the state of the sync that fills
// its role (st; nil when no sync of it is open here yet).
func standingOf(c connection.View, st *readmodel.Status, now time.Time) standing {
	name := api.SystemName(c.System)
	word := api.OrganisationWord(c.Role, c.System)
	confirmed := ""
	if st != nil && !st.ConfirmedAt.IsZero() {
		confirmed = relTime(st.ConfirmedAt, now)
	} else if at := syncConfirmed(c); at != nil {
		confirmed = relTime(*at, now)
	}
	served := ""
	if confirmed != "" {
		served = " Until then its copy, last confirmed with " + name + " " + confirmed + ", is served as it was."
	}
	switch c.Status {
	case connection.Pending:
		if c.Reason != "" {
			return standing{"warn", "waiting for consent", readmodel.Plainly(name, c.Reason) + " Reconnect to ask for the consent again."}
		}
		return standing{"warn", "waiting for consent", "Waiting for the administrator to allow access at " + name + "."}
	case connection.ChooseOrganisation:
		if c.Reason != "" && c.OrganisationID != "" {
			return standing{"warn", "choose the " + word, readmodel.Plainly(name, c.Reason)}
		}
		return standing{"warn", "choose the " + word, name + " gave access to several " + word + "s: choose the one the gateway reads."}
	case connection.NeedsReconnect:
		said := readmodel.Plainly(name, cmp.Or(c.Reason, "the connection waits to be reconnected"))
		return standing{"bad", "needs reconnecting", said + served}
	case connection.Disconnected:
		if c.Reason != "" {
			return standing{"idle", "disconnected", readmodel.Sentence(c.Reason) + " Its access was revoked and its copy removed."}
		}
		return standing{"idle", "disconnected", "Disconnected: its access was revoked and its copy removed."}
	}
	state := ""
	if st != nil {
		state = st.State
	} else if len(c.Sync) > 0 {
		state = c.Sync[0].State
	}
	switch state {
	case readmodel.StateLive:
		if confirmed == "" {
			return standing{"ok", "live", "Connected and up to date with " + name + "."}
		}
		return standing{"ok", "live", "Connected and up to date: confirmed with " + name + " " + confirmed + "."}
	case readmodel.StateBackfilling:
		said := "Connected; the gateway is copying its records from " + name
		if st != nil && st.Progress() != "" {
			said += " (" + st.Progress() + ")"
		} else if len(c.Sync) > 0 && c.Sync[0].Progress != "" {
			said += " (" + c.Sync[0].Progress + ")"
		}
		return standing{"idle", "copying", said + "."}
	case readmodel.StateLagging:
		said := name + " has not confirmed its records lately; the sync is behind and catches up on its next pass."
		if st != nil && st.Reason() != "" {
			said = st.Reason()
		}
		return standing{"warn", "lagging", said}
	case readmodel.StateFailing, "paused":
		said := "The gateway's calls to " + name + " fail; the sync tries again."
		if st != nil && st.Reason() != "" {
			said = st.Reason()
		}
		if confirmed != "" {
			said += " Meanwhile its copy, last confirmed " + confirmed + ", is served as it was."
		}
		return standing{"bad", "failing", said}
	}
	return standing{"idle", "connected", "Connected; its sync starts in a moment."}
}

// syncConfirmed is when c's first sync last confirmed its copy, nil when
// it never did.
func syncConfirmed(c connection.View) *time.Time {
	if len(c.Sync) == 0 {
		return nil
	}
	return c.Sync[0].ConfirmedAt
}

// syncOf is the sync that fills c's role with c's system, nil when none
// is open here.
func syncOf(c connection.View, syncs []readmodel.Status) *readmodel.Status {
	for i := range syncs {
		if syncs[i].Role == c.Role && syncs[i].System == c.System {
			return &syncs[i]
		}
	}
	return nil
}
