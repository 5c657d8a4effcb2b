// Package connection is what the stores keep of a firm's connections to
// its own systems, made by the firm's administrator through /v1/connections
// or the console rather than in the Caddyfile: the connection itself (its
// role, system, status and the vendor organisation it reaches) and the
// pending authorizations of the OAuth2 consent flow. Secrets are not here:
// the vendor's tokens, a Karbon access key and a webhook signing key are
// kept sealed in the upstream state store, under the connection's id. The
// interfaces that read and write connections are declared by their
// consumer, caddymodule/connect.
package connection

import (
	"errors"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Status is where a connection stands.
type Status string

const (
	// Pending waits for the administrator's consent at the vendor.
	Pending Status = "pending"
	// ChooseOrganisation has the vendor's consent for several
	// organisations and waits for the administrator to name one
	// (Choices). Its wire name is the contract's, choose_tenant.
	ChooseOrganisation Status = "choose_tenant"
	// Connected serves the firm: its sync runs.
	Connected Status = "connected"
	// NeedsReconnect: the vendor refused the connection's grant
	// (revoked, expired unused, app removed). Its sync is paused and its
	// copy still served, until the administrator reconnects.
	NeedsReconnect Status = "needs_reconnect"
	// Disconnected: removed by the administrator; its tokens were revoked
	// and its copy purged. Kept so that the firm sees what happened.
	Disconnected Status = "disconnected"
)

// Words is the status as people read it, in the console and the command
// line; the wire keeps the contract's names.
func (s Status) Words() string {
	switch s {
	case Pending:
		return "waiting for consent"
	case ChooseOrganisation:
		return "waiting for an organisation to be chosen"
	case NeedsReconnect:
		return "needs reconnecting"
	}
	return string(s)
}

// Connection is one of a firm's systems, connected by the firm.
type Connection struct {
	ID     string `json:"id"` // con_<random>
	Firm   string `json:"firm"`
	Role   string `json:"role"`   // records, ledger, documents
	System string `json:"system"` // karbon, xpm, xero, sharepoint, onedrive, google_drive, dropbox
	Status Status `json:"status"`
	// Reason says why the status is what it is, in the gateway's words
	// (never the vendor's tokens); empty when connected.
	Reason string `json:"reason,omitempty"`
	// OrganisationID and OrganisationName are the vendor organisation
	// (Xero tenant, Graph site or drive, ...) the connection reads; empty
	// for a vendor whose grant reaches one only. Their wire names are the
	// contract's, tenant_id and tenant_name.
	OrganisationID   string `json:"tenant_id,omitempty"`
	OrganisationName string `json:"tenant_name,omitempty"`
	// Choices are the organisations the grant reaches, while the status
	// is ChooseOrganisation.
	Choices []Organisation `json:"choices,omitempty"`
	// StageMap is the firm's map of its records system's job states to
	// job stages (a state's name -> a stage, "" for a state it leaves
	// unmapped), edited by its administrator over what the states' names
	// suggest; empty until edited. Not a secret: kept as it is.
	StageMap map[string]string `json:"stage_map,omitempty"`
	// Attempt counts the consents asked for; a callback for an older
	// attempt than the connection's is refused.
	Attempt     int        `json:"attempt"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	ConnectedAt *time.Time `json:"connected_at,omitempty"`
	// Version is the store's count of writes of the connection, for a
	// write that must not overwrite another's (Update compares it).
	Version int64 `json:"version"`
}

// Organisation is one vendor organisation a grant reaches (a Xero
// organisation, a SharePoint site): not a practice.Tenant, which is a
// firm's live or sandbox side of the gateway.
type Organisation struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Live reports whether the connection serves the firm's role: its sync
// runs (connected) or its copy is still served while paused
// (needs_reconnect).
func (c Connection) Live() bool { return c.Status == Connected || c.Status == NeedsReconnect }

// Authorization is one consent the gateway asked a vendor for: what its
// start link and its callback need to finish it. It is found by its start
// token once, which binds it to the browser that followed the link, then
// by its state, used once and only by that browser, and refused after
// Expires.
type Authorization struct {
	// OAuthState is OAuth's state parameter: the random value sent to
	// the vendor and back.
	OAuthState string `json:"state"`
	// Start is the token of the gateway's start link
	// ({public_url}/connect/start/<token>), the one address the
	// administrator is given: stores keep it only as its digest, and
	// return it empty.
	Start      string `json:"start,omitempty"`
	Connection string `json:"connection"`
	Firm       string `json:"firm"`
	Attempt    int    `json:"attempt"`
	// Verifier is the PKCE code verifier (RFC 7636), a secret: stores
	// keep it sealed.
	Verifier string    `json:"verifier"`
	Expires  time.Time `json:"expires"`
}

// AuthorizationTTL is how long a consent may take.
const AuthorizationTTL = 10 * time.Minute

var (
	// ErrNotFound is returned for an unknown connection id, and for a
	// state that is unknown, used already or expired.
	ErrNotFound = errors.New("connection not found")
	// ErrVersion is returned by a write whose expected version is not
	// the stored one: another write came first.
	ErrVersion = errors.New("connection changed meanwhile")
	// ErrExists is returned when creating a connection whose id is taken.
	ErrExists = errors.New("connection exists")
	// ErrOtherBrowser is returned for a state whose consent was started
	// by another browser, or by none: the consent is left as it was.
	ErrOtherBrowser = errors.New("the consent was started by another browser")
	// ErrNoStageMap is the answer for the stage map of a connection whose
	// system has no job states of its own to map, or is not open.
	ErrNoStageMap = errors.New("the connection's system has no stage map open")
)

// Request is what an administrator asks of a connection: to connect a
// system (Role, System, and AccessKey for Karbon), to choose the
// organisation a grant reaches (OrganisationID), or to reconnect it
// (Reconnect, with a new AccessKey for Karbon).
type Request struct {
	Role           string `json:"role,omitempty"`
	System         string `json:"system,omitempty"`
	AccessKey      string `json:"access_key,omitempty"`
	OrganisationID string `json:"tenant_id,omitempty"`
	Reconnect      bool   `json:"reconnect,omitempty"`
}

// View is a connection as /v1/connections, the console and the CLI show
// it: what is stored, the consent page while one is awaited, and what the
// gateway knows of its use.
type View struct {
	Connection
	// SystemName is how people name the system ("Xero Practice
	// Manager"), as its module says.
	SystemName string `json:"system_name,omitempty"`
	// AuthorizeURL is the gateway's start link of the consent, which
	// sends the browser that opens it on to the vendor's consent page:
	// answered once, by the write that asked for the consent.
	AuthorizeURL string `json:"authorize_url,omitempty"`
	// LastSuccessAt is the last vendor call that succeeded, as this
	// instance saw it.
	LastSuccessAt *time.Time `json:"last_success_at,omitempty"`
	// Sync is the status of each sync the connection runs.
	Sync []SyncStatus `json:"sync,omitempty"`
}

// SyncStatus is one of a connection's syncs, as the read model reports it.
type SyncStatus struct {
	Role        string     `json:"role"`
	State       string     `json:"state"` // backfilling, live, lagging, failing, paused
	Progress    string     `json:"progress,omitempty"`
	ConfirmedAt *time.Time `json:"confirmed_at,omitempty"`
}

// StageMapView is a records connection's stage map as the admin routes,
// the console and the CLI show it: the vendor's states, read from it, in
// its order, each with the stage it maps to and why; the stages a job can
// be moved to and those it cannot; and the administrator's entries, which
// the connection keeps.
type StageMapView struct {
	Connection string `json:"connection"`
	Firm       string `json:"firm"`
	System     string `json:"system"`
	SystemName string `json:"system_name,omitempty"`
	// States name each state once (a Karbon secondary with the primary it
	// is under).
	States   []practice.StageState `json:"states"`
	Mapped   []string              `json:"mapped_stages"`
	Unmapped []string              `json:"unmapped_stages"`
	Set      map[string]string     `json:"stage_map"`
}
