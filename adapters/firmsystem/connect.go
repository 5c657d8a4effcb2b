package firmsystem

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/caddyserver/caddy/v2"
	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// What connecting a system takes. A firm's administrator connects the
// firm's own systems (POST /v1/connections, the console, practicegw
// connect) through vendor apps the operator registers in the `connect`
// block of the practicegw option. Both sides are guest modules registered
// by the vendor's package, so that `connect { xero { ... } }` is read by
// adapters/xero and the gateway never names a vendor:
//
//	practicegw.connect.<app>            the vendor app: the grant its systems
//	                                    take (Consent or AccessKey), the
//	                                    vendor webhooks it manages
//	                                    (Subscriber) or receives for every
//	                                    firm (Deliveries)
//	practicegw.systems.<role>.<name>    a Connectable system: the app it
//	                                    goes through, and the module a
//	                                    connection opens as (Configure)

// ConnectNamespace is the Caddy module namespace of the connect block's
// vendor apps: `connect { <app> { ... } }` loads practicegw.connect.<app>.
const ConnectNamespace = "practicegw.connect"

// Connectable is a system's module that a firm can connect through an app
// of the connect block, rather than the operator naming it in the firm's
// Caddyfile block.
type Connectable interface {
	Module
	// Connects says which app the system is connected through and how.
	Connects() Connects
	// Configure fills the module's configuration for connection c, made
	// through app: the app Connects names, provisioned.
	Configure(app caddy.Module, c Connection) error
}

// Connects is how a Connectable system is connected.
type Connects struct {
	// App is the app's name in the connect block ("xero").
	App string
	// Label is how people name the system ("Xero Practice Manager").
	Label string
	// Chooses is true when a grant reaches organisations the firm's is
	// chosen among (Xero's organisations, SharePoint's sites), false when
	// it reaches one account, which is connected as it is.
	Chooses bool
	// Organisation is the vendor's own word for what a grant reaches, as
	// pages name it ("organisation" for Xero, "site" for SharePoint,
	// "company" for QuickBooks); "account" when empty (OrganisationWord).
	Organisation string
}

// OrganisationWord is the vendor's word for what a grant of the system
// reaches: Organisation, else "account".
func (c Connects) OrganisationWord() string {
	if c.Organisation == "" {
		return "account"
	}
	return c.Organisation
}

// Connection is what a connection gives the module it opens as. Every
// value is escaped for Expand: a firm's value is never read as one of the
// gateway's placeholders.
type Connection struct {
	// ID is the connection's id (con_…), under which its OAuth2 tokens
	// are kept: a module's OAuth2Config.Connection.
	ID string
	// Organisation is the organisation chosen; "" for one account.
	Organisation string
	// AccessKey is the firm's access key (AccessKey apps).
	AccessKey string
	// WebhookKey is the signing key of the webhook subscriptions the
	// gateway made for the connection (Subscriber apps); "" before any.
	WebhookKey string
	// StageMap is the firm's stage map of a records system (a state's
	// name -> a stage), as its administrator edited it; nil when never.
	StageMap map[string]string
}

// Consent is a connect app whose systems a firm connects by an OAuth2 consent.
type Consent interface {
	// OAuth is the app's OAuth2 client for system.
	OAuth(system string) OAuthClient
	// Organisations lists the organisations a new grant of system reaches,
	// with its access token; called only for a system that Chooses.
	Organisations(ctx context.Context, d upstream.Deps, system, accessToken string) ([]Organisation, error)
}

// CallbackConsent is a Consent app whose vendor names the organisation a
// grant reaches on the consent's callback (Intuit's realmId) rather than
// listing them for the token: the gateway asks it, with the callback's
// query, instead of Organisations.
//
// A callback crosses the browser, so what it names is checked with the
// vendor before it is believed: an organisation it names that the new
// grant's token does not reach is ErrNotReached.
type CallbackConsent interface {
	// CallbackOrganisations lists the organisations the consent's
	// callback names (its query), as the vendor says the new grant's
	// access token reaches them.
	CallbackOrganisations(ctx context.Context, d upstream.Deps, system, accessToken string, callback url.Values) ([]Organisation, error)
}

// ErrNotReached says that a consent's callback names an organisation its
// grant does not reach, as the vendor says.
var ErrNotReached = errors.New("the grant does not reach the organisation the callback names")

// OAuthClient is what a consent needs of an OAuth2 app.
type OAuthClient struct {
	// Config is the client: its id and secret, the endpoints with their
	// auth style, and the scopes; the gateway sets the redirect URL.
	Config oauth2.Config
	// Params are the vendor's own authorize parameters, such as those
	// that give a refresh token.
	Params []oauth2.AuthCodeOption
	// Tokens is the name a grant's tokens are kept under (oauthtoken.Xero):
	// the systems of one identity service share it.
	Tokens string
}

// Organisation is one organisation a grant reaches.
type Organisation struct {
	ID   string
	Name string
}

// Revoker is a Consent app whose vendor lets the gateway end a grant.
type Revoker interface {
	// Revoke ends at the vendor the grant of system that connection holds.
	Revoke(ctx context.Context, d upstream.Deps, system, connection string) error
}

// AccessKey is a connect app whose systems a firm connects by giving an access
// key, which the gateway keeps sealed.
type AccessKey interface {
	// CheckKey makes one cheap call with key: a *RefusedError when the
	// vendor refuses it, another error when the call failed.
	CheckKey(ctx context.Context, d upstream.Deps, key string) error
}

// Subscriber is a connect app that makes each connection's vendor webhook
// subscriptions, delivered to the connection's own address
// ({public_url}/connect/webhooks/<system>/<connection>) and signed with a
// key the gateway makes for it. The gateway checks them every hour.
type Subscriber interface {
	// Subscribe makes every subscription the connection of key in role
	// needs that the vendor does not hold, to target, signed with
	// signingKey, and answers the kinds it made. The role decides which:
	// a firm's records and ledger on one vendor account each have their
	// own.
	Subscribe(ctx context.Context, d upstream.Deps, role, key, target, signingKey string) ([]string, error)
	// Unsubscribe deletes every subscription the connection of key in
	// role made.
	Unsubscribe(ctx context.Context, d upstream.Deps, role, key string) error
}

// Deliveries is a connect app whose vendor sends the webhooks of every
// organisation connected through it to the app's one address,
// {public_url}/connect/webhooks/<app>; the gateway hands each delivery to
// the connections of the organisations it names.
type Deliveries interface {
	// Receives reports whether the app can check deliveries (its webhook
	// key is registered); the address is not served otherwise.
	Receives() bool
	// Route checks a delivery's signature (ErrUnsigned when it is not the
	// vendor's) and names the organisations its events are for.
	Route(header http.Header, body []byte) ([]string, error)
}

// Challenger is a Deliveries app whose vendor sends a verification request
// to the app's one address before it sends anything (Dropbox's challenge):
// the gateway hands it every request there first.
type Challenger interface {
	// Challenge answers r when it is the vendor's verification request,
	// reporting whether it did.
	Challenge(w http.ResponseWriter, r *http.Request) bool
}

// Remembers is a system that keeps, in the upstream state store, what it
// saw of an organisation's records beyond the copy (XPM's first-seen
// stamps, a proposal's first acceptance). The gateway forgets it with the
// copy when the firm's role leaves the organisation (a disconnect, another
// organisation chosen), so that the next one's records are seen afresh.
type Remembers interface {
	// Remembered are the key prefixes of what the system keeps of firm's
	// records of kinds.
	Remembered(firm string, kinds []practice.Kind) []string
}

// RefusedError is a vendor refusing a connection's credentials (an
// access key). Its text is said to the firm's administrator as it is.
type RefusedError struct{ Message string }

func (e *RefusedError) Error() string { return e.Message }

// ErrUnsigned is a delivery whose signature is not the vendor's.
var ErrUnsigned = errors.New("the webhook's signature is not the vendor's")

// ConnectsOf is how the system registered as name in role is connected
// (Connectable), false when it cannot be.
func ConnectsOf(role, name string) (Connects, bool) {
	info, err := caddy.GetModule(Namespace(role) + "." + name)
	if err != nil {
		return Connects{}, false
	}
	c, ok := info.New().(Connectable)
	if !ok {
		return Connects{}, false
	}
	return c.Connects(), true
}

// Remembered are the key prefixes of what the system registered as name
// in role keeps of firm's records of kinds beyond the copy (Remembers);
// none for a system that keeps nothing, or that this binary does not
// register (it kept nothing here).
func Remembered(role, name, firm string, kinds []practice.Kind) []string {
	info, err := caddy.GetModule(Namespace(role) + "." + name)
	if err != nil {
		return nil
	}
	r, ok := info.New().(Remembers)
	if !ok {
		return nil
	}
	return r.Remembered(firm, kinds)
}
