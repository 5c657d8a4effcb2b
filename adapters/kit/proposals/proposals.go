// Package proposals is what the systems that keep a firm's proposals
// (Xero Practice Manager's quotes, the Xero ledger's quotes) share in
// making them the contract's engagements: the one mapping of a vendor's
// state onto the engagement's status, the scope written from a title and
// its tasks, and the memory of when each was first seen accepted.
package proposals

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// Status is the engagement status of a proposal in state, a vendor's
// word (Draft, SENT, Issued, ACCEPTED, Declined, INVOICED, Archived ...;
// case and spacing do not matter): proposed for a draft, sent once the
// client has it, signed once accepted, declined, and ended once invoiced,
// closed, archived or deleted. A word no vendor publishes is an error,
// which the caller reports as the vendor's unusable answer.
func Status(state string) (string, error) {
	switch strings.ToLower(strings.Join(strings.Fields(state), " ")) {
	case "draft":
		return "proposed", nil
	case "sent", "issued", "submitted", "pending":
		return "sent", nil
	case "accepted":
		return "signed", nil
	case "declined", "rejected":
		return "declined", nil
	case "invoiced", "closed", "archived", "deleted", "cancelled", "canceled":
		return "ended", nil
	}
	return "", fmt.Errorf("state %q is not one the vendor publishes", state)
}

// Scope is what a proposal covers as the engagement's scope: its title,
// then the names of its tasks in the vendor's order ("Year-end accounts
// 2025: Accounts preparation, Corporation tax return"). Blank and
// repeated names are left out.
func Scope(title string, tasks []string) string {
	title = strings.TrimSpace(title)
	seen := map[string]bool{}
	var names []string
	for _, t := range tasks {
		t = strings.TrimSpace(t)
		if t != "" && !seen[t] && t != title {
			seen[t] = true
			names = append(names, t)
		}
	}
	switch {
	case len(names) == 0:
		return title
	case title == "":
		return strings.Join(names, ", ")
	}
	return title + ": " + strings.Join(names, ", ")
}

// Signings remembers when each of a firm's proposals was first seen
// accepted, in the upstream state store every instance shares, so that
// signed_at stays what it was first seen as: through later edits of the
// proposal, restarts and other instances' reads, and after a vendor takes
// an acceptance back. A remembered signing is what makes the signing one
// event (dispatcher.Derive raises engagement.signed only for an
// engagement that had no signed_at).
type Signings struct {
	State changes.StateStore
	Firm  string
}

// SigningsPrefix is the prefix of the keys firm's signings are kept
// under in the upstream state store.
func SigningsPrefix(firm string) string {
	return "signed/" + changes.StateKey(practice.Tenant{Firm: firm}, practice.Engagements, "")
}

type signing struct {
	At time.Time `json:"at"`
}

// At is the signed_at of engagement id: the time remembered, else, when
// the proposal is accepted now, seen (the vendor's time of the state read,
// the same on every instance that reads it) remembered from now on; nil
// for a proposal never seen accepted.
func (s Signings) At(ctx context.Context, id string, accepted bool, seen time.Time) (*time.Time, error) {
	key := SigningsPrefix(s.Firm) + id
	raw, err := s.State.Last(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("signing of %s: %w", id, err)
	}
	var old signing
	if raw != nil && json.Unmarshal(raw, &old) == nil && !old.At.IsZero() {
		return &old.At, nil
	}
	if !accepted {
		return nil, nil
	}
	at := seen.UTC()
	b, _ := json.Marshal(signing{At: at})
	if err := s.State.Save(ctx, key, b); err != nil {
		return nil, fmt.Errorf("save signing of %s: %w", id, err)
	}
	return &at, nil
}
