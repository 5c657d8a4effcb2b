package connect

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/connection"
)

// Connections keeps firms' connections.
type Connections interface {
	// CreateConnection stores a new connection (Version 1); connection.ErrExists if its id is taken.
	CreateConnection(ctx context.Context, c connection.Connection) (connection.Connection, error)
	// Connection returns one by id; connection.ErrNotFound when unknown.
	Connection(ctx context.Context, id string) (connection.Connection, error)
	// Connections lists a firm's connections, or every firm's when firm is "", oldest first.
	Connections(ctx context.Context, firm string) ([]connection.Connection, error)
	// UpdateConnection writes c if the stored version is still version, and returns it with Version+1;
	// connection.ErrVersion when another write came first, ErrNotFound when unknown.
	UpdateConnection(ctx context.Context, c connection.Connection, version int64) (connection.Connection, error)
}

// Authorizations keeps the consents awaited.
type Authorizations interface {
	// SaveAuthorization keeps a until a.Expires, found by its start token (a.Start) and by its state.
	SaveAuthorization(ctx context.Context, a connection.Authorization) error
	// StartAuthorization spends the start token and binds its consent to browser (the cookie's value)
	// in the same atomic step, so a token is used once across every instance, and returns the
	// consent; connection.ErrNotFound when unknown, used already or expired at now.
	StartAuthorization(ctx context.Context, token, browser string, now time.Time) (connection.Authorization, error)
	// TakeAuthorization returns the authorization of state and deletes it in the same atomic step, so a
	// state is used once across every instance, if browser started it: connection.ErrOtherBrowser,
	// leaving it, when another browser (or none) did; connection.ErrNotFound when unknown, taken
	// already or expired at now.
	TakeAuthorization(ctx context.Context, state, browser string, now time.Time) (connection.Authorization, error)
}

// Firms are the firms the gateway serves, as its configuration names them.
type Firms interface {
	// FirmName is the firm's display name; false for a firm the gateway
	// does not serve.
	FirmName(id string) (string, bool)
	// Configured reports whether the Caddyfile sets the firm's role,
	// which then takes precedence over any connection.
	Configured(firm, role string) bool
}

// Runtime is what runs a firm's connected systems.
type Runtime interface {
	// Purge stops the connection's sync and drops its copy in the read
	// model and every upstream state of its system, raising no events;
	// no instance's sync of it writes any more, whether or not it has
	// seen the disconnect.
	Purge(ctx context.Context, c connection.Connection) error
	// PurgeOrganisation drops what the connection holds of the
	// organisation it reached (c.OrganisationID) before it reaches
	// another, as Purge does, but leaves it to be opened again.
	PurgeOrganisation(ctx context.Context, c connection.Connection) error
	// Use is the last vendor call that succeeded and the status of each
	// of the connection's syncs, as this instance knows them.
	Use(c connection.Connection) (lastSuccess *time.Time, sync []connection.SyncStatus)
}

// Deps are what a Manager works with.
type Deps struct {
	Connections    Connections
	Authorizations Authorizations
	Firms          Firms
	Runtime        Runtime
	// Stages reads the stage maps of the records connections open here;
	// nil: no connection has one to show or edit.
	Stages StageMaps
	// Upstream gives the vendor clients their budget, clock, logger and
	// locks; its State is the sealed upstream state store, where the
	// connections' tokens, Karbon access keys and webhook signing keys
	// are kept (never in a connection).
	Upstream upstream.Deps
	// HTTPClient makes the calls to the vendors' identity services and
	// APIs; nil is a client with a 30 second timeout.
	HTTPClient *http.Client
}

// Manager connects, reconnects and disconnects firms' own systems: the
// service behind /v1/connections, the console's Systems page and
// `practicegw connect`. Every write of a connection compares its version,
// so two instances (or an administrator and a callback) never overwrite
// each other's step.
type Manager struct {
	cfg    *Config
	d      Deps
	hc     *http.Client
	clock  upstream.Clock
	log    *zap.Logger
	holds  holds
	holder string
}

// New makes the Manager of cfg's apps (nil: none registered).
func New(cfg *Config, d Deps) *Manager {
	hc := d.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Manager{cfg: cfg, d: d, hc: hc, clock: d.Upstream.ClockOrSystem(),
		log: d.Upstream.LoggerOrNop().Named("connect"), holder: randomToken(8)}
}

// The errors the Manager answers besides the parameter errors.
var (
	errStateInvalid = apierror.New(http.StatusBadRequest, "invalid_state",
		"This consent link is unknown, used already or expired; start the connection again from the console or POST /v1/connections.").WithParam("state")
	errConsentDenied = apierror.New(http.StatusBadRequest, "consent_denied",
		"Consent was refused at the vendor; the connection waits until it is reconnected.")
	errNotFound = apierror.New(http.StatusNotFound, "resource_not_found", "No such connection.")
)

func errRoleConfigured(role string) error {
	return apierror.New(http.StatusConflict, "role_configured",
		fmt.Sprintf("The gateway's configuration sets this firm's %s system, which takes precedence; the operator removes it from the Caddyfile first.", role)).WithParam("role")
}

func errNotRegistered(s System) error {
	return apierror.New(http.StatusConflict, "system_not_registered",
		fmt.Sprintf("No %s app is registered with this gateway; the operator registers it in the connect block of the practicegw option (%s { ... }).", s.Label, s.App)).WithParam("system")
}

func errRoleConnected(role, id string) error {
	return apierror.New(http.StatusConflict, "role_connected",
		fmt.Sprintf("The firm's %s role already has a connection; disconnect %s first.", role, id)).WithParam("role")
}

func errConnectionState(c connection.Connection, what string) error {
	return apierror.New(http.StatusConflict, "connection_state",
		fmt.Sprintf("Connection %s is %s: %s.", c.ID, c.Status.Words(), what))
}

// List is the firm's connections, oldest first.
func (m *Manager) List(ctx context.Context, firm string) ([]connection.View, error) {
	if _, ok := m.d.Firms.FirmName(firm); !ok {
		return nil, errNotFound
	}
	cs, err := m.d.Connections.Connections(ctx, firm)
	if err != nil {
		return nil, fmt.Errorf("list connections: %w", err)
	}
	out := make([]connection.View, 0, len(cs))
	for _, c := range cs {
		out = append(out, m.view(c, ""))
	}
	return out, nil
}

// Get is one of the firm's connections.
func (m *Manager) Get(ctx context.Context, firm, id string) (connection.View, error) {
	c, err := m.load(ctx, firm, id)
	if err != nil {
		return connection.View{}, err
	}
	// The consent page is answered by Connect and Update alone: it would
	// have to be rebuilt from the PKCE verifier, which stays sealed.
	return m.view(c, ""), nil
}

// load reads the firm's connection id: another firm's is not found.
func (m *Manager) load(ctx context.Context, firm, id string) (connection.Connection, error) {
	c, err := m.d.Connections.Connection(ctx, id)
	if errors.Is(err, connection.ErrNotFound) || err == nil && c.Firm != firm {
		return connection.Connection{}, errNotFound
	}
	if err != nil {
		return connection.Connection{}, fmt.Errorf("read connection: %w", err)
	}
	return c, nil
}

// loadHeld holds the firm's connection id for one step and reads it.
func (m *Manager) loadHeld(ctx context.Context, firm, id string) (connection.Connection, func(), error) {
	if _, err := m.load(ctx, firm, id); err != nil {
		return connection.Connection{}, nil, err
	}
	release, err := m.hold(ctx, "connection/"+id)
	if err != nil {
		return connection.Connection{}, nil, err
	}
	c, err := m.load(ctx, firm, id)
	if err != nil {
		release()
		return connection.Connection{}, nil, err
	}
	return c, release, nil
}

func (m *Manager) view(c connection.Connection, authorizeURL string) connection.View {
	v := connection.View{Connection: c, SystemName: Label(c.System)}
	if c.Status == connection.Pending {
		v.AuthorizeURL = authorizeURL
	}
	if m.d.Runtime != nil {
		v.LastSuccessAt, v.Sync = m.d.Runtime.Use(c)
	}
	return v
}

// Connect starts a connection of the firm's role to a system: a pending
// connection and the vendor's consent page for an OAuth2 system, a
// connected one for Karbon once its access key works.
func (m *Manager) Connect(ctx context.Context, firm string, r connection.Request) (connection.View, error) {
	s, err := m.checkConnect(firm, r)
	if err != nil {
		return connection.View{}, err
	}
	if s.Key {
		// The key is checked before anything is stored: a refused key
		// leaves nothing behind. A role already connected is said first:
		// that is what the administrator must change, whatever the key.
		if err := m.roleFree(ctx, firm, s.Role); err != nil {
			return connection.View{}, err
		}
		if err := m.checkKey(ctx, s, r.AccessKey); err != nil {
			return connection.View{}, err
		}
	}
	c, err := m.create(ctx, firm, s)
	if err != nil {
		return connection.View{}, err
	}
	if s.Key {
		release, err := m.hold(ctx, "connection/"+c.ID)
		if err != nil {
			return connection.View{}, err
		}
		defer release()
		c, err = m.connectKey(ctx, c, s, r.AccessKey)
		if err != nil {
			return connection.View{}, err
		}
		return m.view(c, ""), nil
	}
	u, err := m.authorize(ctx, c, s)
	if err != nil {
		return connection.View{}, err
	}
	return m.view(c, u), nil
}

// checkConnect checks a connect request before anything is read or
// written.
func (m *Manager) checkConnect(firm string, r connection.Request) (System, error) {
	if _, ok := m.d.Firms.FirmName(firm); !ok {
		return System{}, errNotFound
	}
	switch {
	case r.Role == "":
		return System{}, practice.Missing("role")
	case !slices.Contains(Roles, r.Role):
		return System{}, practice.Invalid("role", "role must be one of %s.", strings.Join(Roles, ", "))
	case r.System == "":
		return System{}, practice.Missing("system")
	}
	s, ok := Lookup(r.Role, r.System)
	if !ok || s.Role != r.Role {
		return System{}, practice.Invalid("system", "The %s role takes one of %s.", r.Role, strings.Join(SystemNames(r.Role), ", "))
	}
	switch {
	case r.OrganisationID != "":
		return System{}, practice.Invalid("tenant_id", "tenant_id names the organisation of an existing connection (PATCH /v1/connections/{id}).")
	case r.Reconnect:
		return System{}, practice.Invalid("reconnect", "reconnect applies to an existing connection (PATCH /v1/connections/{id}).")
	case s.Key && r.AccessKey == "":
		return System{}, practice.Missing("access_key")
	case s.Key && !wellFormedKey(r.AccessKey):
		return System{}, errKeyMalformed
	case !s.Key && r.AccessKey != "":
		return System{}, practice.Invalid("access_key", "%s is connected through its consent page and takes no access key.", s.Label)
	case m.d.Firms.Configured(firm, r.Role):
		return System{}, errRoleConfigured(r.Role)
	case m.cfg.app(s.App) == nil:
		return System{}, errNotRegistered(s)
	}
	return s, nil
}

// create stores a new pending connection of s for the firm, unless the
// firm's role has one that is not disconnected. Connects of one role are
// taken one at a time (on this instance and, under a lease, across
// instances), so two administrators racing get one connection.
func (m *Manager) create(ctx context.Context, firm string, s System) (connection.Connection, error) {
	unlock, err := m.hold(ctx, "firm/"+firm+"/"+s.Role)
	if err != nil {
		return connection.Connection{}, err
	}
	defer unlock()
	if err := m.roleFree(ctx, firm, s.Role); err != nil {
		return connection.Connection{}, err
	}
	now := m.clock.Now().UTC()
	reason := "waiting for consent at " + s.Label
	if s.Key {
		reason = "checking the access key with " + s.Label
		if _, ok := m.cfg.app(s.App).(firmsystem.Subscriber); ok {
			reason = "making " + s.Label + "'s webhook subscriptions"
		}
	}
	for {
		c, err := m.d.Connections.CreateConnection(ctx, connection.Connection{
			ID: newID(), Firm: firm, Role: s.Role, System: s.Name, Status: connection.Pending,
			Reason: reason, Attempt: 1, CreatedAt: now, UpdatedAt: now,
		})
		if errors.Is(err, connection.ErrExists) {
			continue
		}
		if err != nil {
			return connection.Connection{}, fmt.Errorf("create connection: %w", err)
		}
		return c, nil
	}
}

// roleFree refuses a connect of the firm's role while it has a
// connection that is not disconnected.
func (m *Manager) roleFree(ctx context.Context, firm, role string) error {
	cs, err := m.d.Connections.Connections(ctx, firm)
	if err != nil {
		return fmt.Errorf("list connections: %w", err)
	}
	for _, c := range cs {
		if c.Role == role && c.Status != connection.Disconnected {
			return errRoleConnected(role, c.ID)
		}
	}
	return nil
}

// maxAccessKey bounds an access key: vendors' are far shorter (Karbon's),
// and a key goes into every request's headers.
const maxAccessKey = 512

var errKeyMalformed = practice.Invalid("access_key",
	"An access key is printable ASCII of at most %d characters; copy it again from the system's settings.", maxAccessKey)

// wellFormedKey reports whether key can be an access key at all: printable
// ASCII, which a request header carries as it is, and not too long. Any
// other is refused before the vendor is asked.
func wellFormedKey(key string) bool {
	if len(key) > maxAccessKey {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// Update chooses the organisation of a connection waiting in
// choose_tenant (OrganisationID), or reconnects it (Reconnect: a new consent,
// or for Karbon a new AccessKey).
func (m *Manager) Update(ctx context.Context, firm, id string, r connection.Request) (connection.View, error) {
	c, release, err := m.loadHeld(ctx, firm, id)
	if err != nil {
		return connection.View{}, err
	}
	defer release()
	s, _ := Lookup(c.Role, c.System)
	switch {
	case r.Role != "" && r.Role != c.Role:
		return connection.View{}, practice.Invalid("role", "A connection's role does not change; disconnect it and connect another.")
	case r.System != "" && r.System != c.System:
		return connection.View{}, practice.Invalid("system", "A connection's system does not change; disconnect it and connect another.")
	case r.OrganisationID != "" && r.Reconnect:
		return connection.View{}, practice.Invalid("tenant_id", "Send tenant_id or reconnect, not both.")
	case r.OrganisationID != "":
		if r.AccessKey != "" {
			return connection.View{}, practice.Invalid("access_key", "access_key is sent with reconnect.")
		}
		c, err = m.choose(ctx, c, r.OrganisationID)
		if err != nil {
			return connection.View{}, err
		}
		return m.view(c, ""), nil
	case !r.Reconnect:
		return connection.View{}, practice.Invalid("reconnect", "Send tenant_id to choose the organisation, or reconnect: true.")
	case c.Status == connection.Disconnected:
		return connection.View{}, errConnectionState(c, "connect the system anew (POST /v1/connections)")
	case m.cfg.app(s.App) == nil:
		return connection.View{}, errNotRegistered(s)
	case s.Key:
		if r.AccessKey == "" {
			return connection.View{}, practice.Missing("access_key")
		}
		if !wellFormedKey(r.AccessKey) {
			return connection.View{}, errKeyMalformed
		}
		if err := m.checkKey(ctx, s, r.AccessKey); err != nil {
			return connection.View{}, err
		}
		c, err = m.reconnectKey(ctx, c, s, r.AccessKey)
		if err != nil {
			return connection.View{}, err
		}
		return m.view(c, ""), nil
	case r.AccessKey != "":
		return connection.View{}, practice.Invalid("access_key", "%s is reconnected through its consent page and takes no access key.", s.Label)
	}
	return m.reconnect(ctx, c, s)
}

// choose names the organisation of a connection in choose_tenant. One
// other than the organisation it reached before (a reconnect whose
// consent did not reach that one) replaces it: the old organisation's
// copy, checkpoints and upstream state are purged first, so that the new
// one's backfill starts afresh and /v1 never lists both.
func (m *Manager) choose(ctx context.Context, c connection.Connection, tenant string) (connection.Connection, error) {
	if c.Status != connection.ChooseOrganisation {
		return connection.Connection{}, errConnectionState(c, "there is no organisation to choose")
	}
	if !slices.ContainsFunc(c.Choices, func(t connection.Organisation) bool { return t.ID == tenant }) {
		return connection.Connection{}, practice.Invalid("tenant_id", "tenant_id must be one of the connection's choices.")
	}
	if c.OrganisationID != "" && c.OrganisationID != tenant && m.d.Runtime != nil {
		if err := m.d.Runtime.PurgeOrganisation(ctx, c); err != nil {
			return connection.Connection{}, fmt.Errorf("purge the organisation connected before: %w", err)
		}
		m.log.Info("connection moves to another organisation: the copy of the one before is purged",
			zap.String("connection", c.ID), zap.String("firm", c.Firm), zap.String("system", c.System))
	}
	return m.write(ctx, c.ID, func(c *connection.Connection) error {
		if c.Status != connection.ChooseOrganisation {
			return errConnectionState(*c, "there is no organisation to choose")
		}
		for _, t := range c.Choices {
			if t.ID == tenant {
				now := m.clock.Now().UTC()
				c.Status, c.Reason, c.OrganisationID, c.OrganisationName, c.Choices = connection.Connected, "", t.ID, t.Name, nil
				c.ConnectedAt = &now
				return nil
			}
		}
		return practice.Invalid("tenant_id", "tenant_id must be one of the connection's choices.")
	})
}

// reconnectReason is a reconnect's reason until its consent is given:
// reads meanwhile answer from the copy held, failing, and say this.
const reconnectReason = "a reconnect waits for the administrator's consent; the copy held before it is served until then"

// reconnect asks the vendor for a new consent: a new attempt, so that a
// callback of an older one is refused. The tenant is kept, so that the
// same organisation is chosen again when the new grant reaches it, and
// the sync resumes from its checkpoint.
func (m *Manager) reconnect(ctx context.Context, c connection.Connection, s System) (connection.View, error) {
	c, err := m.write(ctx, c.ID, func(c *connection.Connection) error {
		if c.Status == connection.Disconnected {
			return errConnectionState(*c, "connect the system anew (POST /v1/connections)")
		}
		c.Attempt++
		c.Status, c.Reason, c.Choices = connection.Pending, reconnectReason, nil
		return nil
	})
	if err != nil {
		return connection.View{}, err
	}
	u, err := m.authorize(ctx, c, s)
	if err != nil {
		return connection.View{}, err
	}
	return m.view(c, u), nil
}

// NeedsReconnect marks the connection id needs_reconnect with reason (in
// the gateway's words, never the vendor's): the vendor refused its grant
// (upstream.Deps.GrantRefused) or its key. A connection that is not
// connected (pending a consent, disconnected) is left as it is.
func (m *Manager) NeedsReconnect(ctx context.Context, id, reason string) error {
	release, err := m.hold(ctx, "connection/"+id)
	if err != nil {
		return err
	}
	defer release()
	return m.needsReconnect(ctx, id, reason)
}

// needsReconnect is NeedsReconnect with the connection held.
func (m *Manager) needsReconnect(ctx context.Context, id, reason string) error {
	c, err := m.write(ctx, id, func(c *connection.Connection) error {
		if c.Status != connection.Connected {
			return errUnchanged
		}
		c.Status, c.Reason = connection.NeedsReconnect, reason
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	if err != nil {
		return err
	}
	m.log.Warn("connection needs reconnecting", zap.String("connection", c.ID), zap.String("firm", c.Firm),
		zap.String("system", c.System), zap.String("reason", reason))
	return nil
}

// errUnchanged is a change that finds nothing to do.
var errUnchanged = errors.New("nothing to change")

// write applies change to the stored connection id and writes it if no
// other write came first; otherwise it reads it again and applies change
// to what is stored now, which may refuse it.
func (m *Manager) write(ctx context.Context, id string, change func(*connection.Connection) error) (connection.Connection, error) {
	for {
		c, err := m.d.Connections.Connection(ctx, id)
		if errors.Is(err, connection.ErrNotFound) {
			return connection.Connection{}, errNotFound
		}
		if err != nil {
			return connection.Connection{}, fmt.Errorf("read connection: %w", err)
		}
		version := c.Version
		if err := change(&c); err != nil {
			return connection.Connection{}, err
		}
		c.UpdatedAt = m.clock.Now().UTC()
		saved, err := m.d.Connections.UpdateConnection(ctx, c, version)
		if errors.Is(err, connection.ErrVersion) {
			continue
		}
		if err != nil {
			return connection.Connection{}, fmt.Errorf("write connection: %w", err)
		}
		return saved, nil
	}
}

// newID is con_ and 24 random base32 characters.
func newID() string {
	const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[b[i]&31]
	}
	return "con_" + string(b)
}

// randomToken is n random bytes, base64url without padding.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
