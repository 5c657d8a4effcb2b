// Package adminapi is the shape of the answers of the gateway's admin
// routes (/practicegw/...): caddymodule/admin writes them and the CLI
// (cmd/internal/cli) reads them over HTTP. They sit below both, so that
// the CLI imports no Caddy module, and beside the stores, whose values
// they show.
package adminapi

import (
	"encoding/json"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/credential"
	"github.com/practicegw/practicegw/store/usage"
)

// CredentialView is a credential as the admin routes show it.
type CredentialView struct {
	*credential.Credential
	Stale bool `json:"stale"`
	// Traffic is the last 24 hours against the ceiling, when a rate
	// limiter serves the credential's routes.
	Traffic *usage.Traffic `json:"traffic,omitempty"`
}

// IssuedCredential is the answer to issuing: the only time the token is
// shown.
type IssuedCredential struct {
	ID        string   `json:"id"`
	Token     string   `json:"token"`
	Firm      string   `json:"firm"`
	Name      string   `json:"name"`
	Scopes    []string `json:"scopes"`
	Sandbox   bool     `json:"sandbox"`
	RateLimit string   `json:"rate_limit,omitempty"`
}

// SyncView is a firm system's sync with its read model as the admin
// routes show it.
type SyncView struct {
	Firm string `json:"firm"`
	// Role is what the system is to the firm ("records", "ledger",
	// "documents"); System is the system that fills it ("karbon"). Their
	// names in JSON are the admin API's since before, and stay.
	Role   string `json:"system"`
	System string `json:"vendor"`
	// State is backfilling, live, lagging or failing; Why says why it
	// lags or fails, in one sentence for an administrator (the error
	// chain it comes from is in the gateway's log).
	State  string `json:"state"`
	Why    string `json:"why,omitempty"`
	Holder string `json:"holder,omitempty"`
	// HeldBy are the instances holding the firm's read model, when each
	// holds a share of the firms.
	HeldBy []string `json:"held_by,omitempty"`
	// ConfirmedAt and AgeSeconds say how fresh the data is; absent until
	// every kind is backfilled.
	ConfirmedAt   time.Time `json:"confirmed_at,omitzero"`
	AgeSeconds    *int64    `json:"age_seconds,omitempty"`
	Progress      string    `json:"progress,omitempty"`
	CallsLastHour uint64    `json:"calls_last_hour"`
	BudgetPerHour int       `json:"budget_per_hour,omitempty"`
	// Plan says how the sync spaces its polls to keep within its share of
	// the vendor's allowances; PlanCalls are the calls it plans per
	// PlanPeriod ("24h0m0s"), of PlanLimit published, at most PlanShare
	// of them.
	Plan       string         `json:"plan,omitempty"`
	PlanCalls  int            `json:"plan_calls,omitempty"`
	PlanLimit  int            `json:"plan_limit,omitempty"`
	PlanShare  int            `json:"plan_share,omitempty"`
	PlanPeriod string         `json:"plan_period,omitempty"`
	Kinds      []SyncKindView `json:"kinds"`
	// Notifications are the last hour's notifications from the vendor
	// that became change records, as this instance read them, and their
	// p50 and p99 from notification to change record, in milliseconds.
	Notifications     int   `json:"notifications_last_hour"`
	NotifiedP50Millis int64 `json:"notified_p50_ms,omitempty"`
	NotifiedP99Millis int64 `json:"notified_p99_ms,omitempty"`
	// SubscribedUntil is when the vendor subscription the sync keeps (a
	// Graph subscription, a Drive channel) lapses unless renewed;
	// SubscribeError why it could not be made or renewed, in a
	// sentence.
	SubscribedUntil time.Time `json:"subscribed_until,omitzero"`
	SubscribeError  string    `json:"subscribe_error,omitempty"`
	// Unusable are the records whose vendor answers the sync cannot use:
	// served as last known, asked for again at each poll of their kind.
	Unusable []UnusableView `json:"unusable,omitempty"`
	// Links are what a ledger or document store found of its customers
	// or client folders in the firm's records system (absent for a
	// records system, or with linking off): Missing match no client,
	// Ambiguous more than one, and their records name no client (null);
	// Summary says it in a sentence ("12 of 340 Xero contacts match no
	// Karbon client").
	Links *LinksView `json:"links,omitempty"`
}

// LinksView counts a system's customers or client folders by how they
// match the records system's clients.
type LinksView struct {
	Of         string `json:"of"`
	Records    string `json:"records,omitempty"`
	Candidates int    `json:"candidates"`
	Linked     int    `json:"linked"`
	Missing    int    `json:"missing"`
	Ambiguous  int    `json:"ambiguous"`
	Summary    string `json:"summary"`
}

// UnusableView is a record the sync cannot use the vendor's answer for,
// and why, in the gateway's words.
type UnusableView struct {
	Kind   practice.Kind `json:"kind"`
	ID     string        `json:"id"`
	Reason string        `json:"reason"`
}

// RoleView is how one of a firm's roles is served, as its /v1 reads are.
type RoleView struct {
	Role string `json:"role"` // records, ledger, documents
	// Source is what serves it: caddyfile (the firm's block names its
	// system), connection (connected, or held while it waits for its
	// administrator), demo (the block sets the role to demo records) or
	// not_connected (reads answer system_not_connected).
	Source string `json:"source"`
	// System is the system serving it, or the connection's that does not.
	System string `json:"system,omitempty"`
	// Connection and Status are the role's newest connection, if any.
	Connection string `json:"connection,omitempty"`
	Status     string `json:"status,omitempty"`
}

// The sources of a role's records (RoleView.Source).
const (
	SourceCaddyfile    = "caddyfile"
	SourceConnection   = "connection"
	SourceDemo         = "demo"
	SourceNotConnected = "not_connected"
)

// SyncKindView is one kind's part of a sync.
type SyncKindView struct {
	Kind       practice.Kind `json:"kind"`
	Backfilled bool          `json:"backfilled"`
	// Seen is how many records the current full pass has read; About is
	// how many the last one found.
	Seen        int       `json:"seen"`
	About       int       `json:"about,omitempty"`
	Records     int       `json:"records"`
	ConfirmedAt time.Time `json:"confirmed_at,omitzero"`
	// PollSeconds is how often the plan polls the kind (every kind is
	// polled, its vendor's webhooks or not).
	PollSeconds int64 `json:"poll_seconds,omitempty"`
	// Notified says the vendor notifies the kind's changes, read as soon
	// as they come; Reaches says for people how its changes reach the
	// gateway ("notified; polled every 1m as well", "polled every 5m").
	Notified bool   `json:"notified"`
	Reaches  string `json:"reaches"`
	// Unusable counts the kind's records whose vendor answers cannot be
	// used (SyncView.Unusable names them).
	Unusable int `json:"unusable,omitempty"`
}

// Triggered is the sandbox change a trigger made and the event it raises.
type Triggered struct {
	Event    string          `json:"event"`
	EventID  string          `json:"event_id"`
	Resource string          `json:"resource_id"`
	Object   json.RawMessage `json:"object"`
}

// Refusal is the body of an admin route's refusal of what a request
// asked: the gateway's sentence, and the contract's code and the
// parameter it names, so that the CLI can say it in the words of the
// flag that carried the parameter. An error of the endpoint itself
// carries the sentence alone, as Caddy's admin API answers.
type Refusal struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
	Param string `json:"param,omitempty"`
}
