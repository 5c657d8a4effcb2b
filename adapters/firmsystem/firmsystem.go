// Package firmsystem is what a firm's system gives the gateway: each vendor
// system (Karbon, Xero, SharePoint, ...) is a Caddy guest module in the
// namespace of the role it plays for a firm, and the practicegw app loads
// the firm's `records`, `ledger` and `documents` modules and opens them.
//
//	practicegw.systems.records.<name>     clients, jobs, engagements, people
//	practicegw.systems.ledger.<name>      invoices
//	practicegw.systems.documents.<name>   documents
//
// A firm whose role names no module (`records demo`) is served by the
// seeded demo records. Adding a system is a folder under adapters/ with
// its module, plus one blank import in cmd/practicegw.
package firmsystem

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// Namespace is the Caddy module namespace of the systems that play role
// (records, ledger or documents).
func Namespace(role string) string { return "practicegw.systems." + role }

// Module is a firm's system, configured. The app opens it once per firm
// after Caddy has provisioned and validated it.
type Module interface {
	caddy.Module
	Open(d Deps) (Opened, error)
}

// Deps is what the app hands a system when it opens it.
type Deps struct {
	// Firm is the firm the system serves.
	Firm string
	// Upstream is the resilient client's shared parts: logger, vendor
	// budgets, metrics, upstream state and the change sink.
	Upstream upstream.Deps
	// Records is the firm's records system when it is a real one, nil for
	// demo records.
	Records practice.Reader
	// Clients finds the practice's client of a ledger's customer or a
	// document store's client folder in the firm's records system,
	// whichever serves the firm's clients when it is asked (its Caddyfile
	// block's or a connection's, connected before or after): nil when
	// the firm turns linking off (its block's `link_clients off`).
	Clients linking.Linker
	// KeepsLedger says, to a records system, that the firm names no
	// ledger: the invoices the system keeps too (Opened.Ledger) are the
	// firm's, and the system reads their notifications.
	KeepsLedger bool
	// KeepsEngagements reports, to a system that keeps proposals, whether
	// the firm's engagements come from it (EngagementsRole): only then
	// does it read its proposals' changes and notifications. Nil means
	// they do.
	KeepsEngagements func() bool
	// WebhookURL is where the gateway takes the system's vendor
	// notifications ({public_url}/ingest/<firm>/<system>, or a
	// connection's own address), when it knows its public address: a
	// system whose vendor notifies only while subscribed (Microsoft
	// Graph, Google Drive) subscribes to it. Empty when unknown.
	WebhookURL string
}

// Opened is a firm's system, ready to serve.
type Opened struct {
	// Label is how people name the system ("Karbon"), for readiness and
	// the console ("Karbon jobs: 3,200 of about 5,000"); the system's
	// name in the Caddyfile when empty.
	Label string
	// Reader serves the kinds of the system's role.
	Reader practice.Reader
	// Customers is what a ledger calls the customers its records name
	// ("contacts"), for the count of those that match no client of the
	// firm's records system; "customers" when empty.
	Customers string
	// Ledger is invoices, when the records system keeps them too; served
	// when the firm configures no ledger.
	Ledger practice.Reader
	// Engagements says the system keeps the firm's proposals (quotes,
	// estimates) and its Reader serves them as engagements. A firm's
	// engagements come from one system (EngagementsRole).
	Engagements bool
	// Clients and Jobs take writes; records systems only.
	Clients practice.ClientWriter
	Jobs    practice.JobWriter
	// Stages is the stage map of a records system whose vendor has job
	// states of its own (XPM's job states, Karbon's work statuses); nil
	// for one whose states are the stages.
	Stages StageMapper
	// Client is the system's resilient HTTP client, whose breaker the
	// readiness probe reports.
	Client *upstream.Client
	// Webhook is the receiver of the vendor's change notifications, made
	// once when the system is opened, raising change records into the
	// sink it was opened with (Deps.Upstream.Changes); nil if the vendor
	// sends none.
	Webhook http.Handler
}

// StageMapper is a records system's stage map: which of its vendor's job
// states stands for each stage, by the firm's map over what their names
// suggest (practice.SuggestStage).
type StageMapper interface {
	// StageMap is the vendor's states, read from it, in its order, each
	// with the stage it maps to under set, the firm's map (nil: the one
	// the system has). An entry of set naming no state of the vendor's,
	// or no stage, is a *practice.InvalidError on stage_map.
	StageMap(ctx context.Context, set map[string]string) ([]practice.StageState, error)
	// SetStageMap makes set the firm's map: the stages jobs read and the
	// states moves write follow it from now on.
	SetStageMap(set map[string]string) error
}

// ProposalKeeper is a system's module that keeps a firm's proposals
// (quotes, estimates) whatever its configuration: its Opened.Engagements
// is true. The gateway asks it of a connection's system before opening
// it, to know which of the firm's systems keeps its engagements.
type ProposalKeeper interface {
	KeepsProposals() bool
}

// KeepsProposals reports whether the system registered as name in role
// keeps a firm's proposals, by its module's word (ProposalKeeper).
func KeepsProposals(role, name string) bool {
	info, err := caddy.GetModule(Namespace(role) + "." + name)
	if err != nil {
		return false
	}
	k, ok := info.New().(ProposalKeeper)
	return ok && k.KeepsProposals()
}

// Kinds are the kinds a system owns in the read model by its role, whatever
// the vendor, in a firm whose engagements come from its records system:
// the contract gives the records system clients, engagements, jobs and
// people, the ledger invoices and the document store documents.
func Kinds(role string) []practice.Kind {
	switch role {
	case "records":
		return []practice.Kind{practice.Clients, practice.Engagements, practice.Jobs, practice.People}
	case "ledger":
		return []practice.Kind{practice.Invoices}
	case "documents":
		return []practice.Kind{practice.Documents}
	}
	return nil
}

// The sources of a firm's engagements, as a firm block names them
// (`engagements records|ledger|none`).
const (
	EngagementsRecords = "records"
	EngagementsLedger  = "ledger"
	EngagementsNone    = "none"
)

// EngagementsRole is the role whose system keeps a firm's engagements:
// the one the firm names, else the first of records and ledger whose
// system keeps them (keeps[role]), else none: no system of the firm keeps
// proposals (Karbon's), and the firm's records system answers that it
// has no engagements (NoEngagements). none may be named too. A named
// role whose system keeps no proposals is an error, said at start.
func EngagementsRole(named string, keeps map[string]bool) (string, error) {
	switch named {
	case "":
		for _, role := range []string{EngagementsRecords, EngagementsLedger} {
			if keeps[role] {
				return role, nil
			}
		}
		return EngagementsNone, nil
	case EngagementsNone:
		return named, nil
	case EngagementsRecords, EngagementsLedger:
		if !keeps[named] {
			return "", fmt.Errorf("engagements %s: the firm's %s system keeps no proposals (quotes or estimates)", named, named)
		}
		return named, nil
	}
	return "", fmt.Errorf("engagements %q: one of records, ledger or none", named)
}

// KindsOf are the kinds role owns in the read model of a firm whose
// engagements come from the system in the role engagements names
// (EngagementsRole): the role's own kinds, with engagements only for the
// system that keeps them. A system that keeps no proposals never owns
// the kind, so that nothing about it changes when another system of the
// firm that keeps them comes or goes (a ledger connected later).
func KindsOf(role, engagements string) []practice.Kind {
	keeps := role == engagements && (role == EngagementsRecords || role == EngagementsLedger)
	var out []practice.Kind
	for _, k := range Kinds(role) {
		if k != practice.Engagements || keeps {
			out = append(out, k)
		}
	}
	if keeps && !slices.Contains(out, practice.Engagements) {
		out = append(out, practice.Engagements)
	}
	return out
}

// NoEngagements answers the engagements of a firm none of whose systems
// keeps them (or that says `engagements none`) from its records system's
// reader, as none: an empty list, and not found for one. The rest is the
// reader's. Their freshness is the records' (its clients'): the answer is
// as current as the records system that says it keeps no proposals, and
// is served with Data-State and Data-Confirmed-At as every kind of the
// firm's real systems is.
type NoEngagements struct{ practice.Reader }

func (n NoEngagements) List(ctx context.Context, t practice.Tenant, k practice.Kind, q practice.Query) (practice.Page, error) {
	if k == practice.Engagements {
		return practice.Page{Items: []json.RawMessage{}}, nil
	}
	return n.Reader.List(ctx, t, k, q)
}

func (n NoEngagements) Get(ctx context.Context, t practice.Tenant, k practice.Kind, id string) (json.RawMessage, error) {
	if k == practice.Engagements {
		return nil, fmt.Errorf("no engagement %q: the firm's engagements are kept by none of its systems: %w", id, practice.ErrNotFound)
	}
	return n.Reader.Get(ctx, t, k, id)
}

// Freshness is the reader's: of its clients for engagements. False when
// the reader says none (the demo records).
func (n NoEngagements) Freshness(k practice.Kind) (practice.Freshness, bool) {
	fr, ok := n.Reader.(interface {
		Freshness(practice.Kind) (practice.Freshness, bool)
	})
	if !ok {
		return practice.Freshness{}, false
	}
	if k == practice.Engagements {
		k = practice.Clients
	}
	return fr.Freshness(k)
}

// The values of link_clients, in a firm's block or a ledger's or
// document store's: records (the default) links their records' clients
// to the firm's records system, off names none (null).
const (
	LinkRecords = "records"
	LinkOff     = "off"
)

// Linked reports whether link_clients, as a ledger's or document store's
// block (or a firm's) says it, links clients, checking the value.
func Linked(linkClients string) (bool, error) {
	switch linkClients {
	case "", LinkRecords:
		return true, nil
	case LinkOff:
		return false, nil
	}
	return false, fmt.Errorf("link_clients %q: records or off", linkClients)
}

// Linker is what a ledger or document store whose block says
// linkClients links its records' clients through: the firm's records
// system (Deps.Clients), nil when either the block or the firm turns
// linking off.
func Linker(d Deps, linkClients string) linking.Linker {
	if linked, _ := Linked(linkClients); !linked {
		return nil
	}
	return d.Clients
}

// Expand replaces placeholders such as {env.KARBON_BEARER} or
// {file./run/secrets/xero} in every string of a configuration, in place,
// so secrets stay out of the adapted JSON and are read when the firm is
// provisioned.
func Expand(cfg any) {
	repl := caddy.NewReplacer()
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.String:
			if v.CanSet() {
				v.SetString(repl.ReplaceAll(v.String(), ""))
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.String {
				// Slices share their backing array with the configuration
				// they were copied from: write a fresh one.
				out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
				for i := 0; i < v.Len(); i++ {
					out.Index(i).SetString(repl.ReplaceAll(v.Index(i).String(), ""))
				}
				v.Set(out)
				return
			}
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Map:
			if v.Type().Elem().Kind() == reflect.String && !v.IsNil() {
				out := reflect.MakeMapWithSize(v.Type(), v.Len())
				for _, k := range v.MapKeys() {
					out.SetMapIndex(k, reflect.ValueOf(repl.ReplaceAll(v.MapIndex(k).String(), "")).Convert(v.Type().Elem()))
				}
				v.Set(out)
			}
		}
	}
	walk(reflect.ValueOf(cfg))
}
