package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/health"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// upstreamSystem is one of a firm's real systems, as the app needs it
// beyond reading records: its breaker for readiness and its webhook for
// ingest.
type upstreamSystem struct {
	role    string // records, documents, ledger
	name    string // karbon, xero, sharepoint, ...
	client  *upstream.Client
	webhook func(changes.ChangeSink) http.Handler
}

// backends builds a firm's backends: the systems its configuration names
// for each role, loaded as guest modules, and demo records for the roles
// it sets to demo.
// Records come first, since a ledger or document store may name its
// clients through them.
func (a *App) backends(ctx caddy.Context, f *Firm) (*firmBackends, error) {
	d := a.shared.demo
	b := &firmBackends{records: d, clients: d, jobs: d, documents: d, ledger: d, demo: map[string]bool{}}
	// Its connections are placed too, whether or not it has a Caddyfile
	// system.
	b.placed = a.cluster != nil
	for _, role := range f.Demo {
		b.demo[role] = true
	}
	cfg, err := a.Sync.config()
	if err != nil {
		return nil, err
	}
	// The firm's real systems compare their changes with, and serve their
	// reads from, the firm's read model.
	model := a.newModel(f.ID)
	rec := &changes.Recorder{State: model}
	var records practice.Reader
	ledgerless := f.LedgerRaw == nil
	// The systems are opened first and their syncs made after, once it is
	// known which of them keeps the firm's engagements.
	type openedSystem struct {
		role, system, label string
		opened              firmsystem.Opened
	}
	var systems []openedSystem
	keeps := map[string]bool{}
	// Which role keeps the firm's engagements is known once every system
	// is open; a system that keeps proposals asks when it reads them.
	var engagementsFrom atomic.Pointer[string]
	for _, role := range []struct {
		name  string
		field string
		raw   json.RawMessage
	}{
		{"records", "RecordsRaw", f.RecordsRaw},
		{"ledger", "LedgerRaw", f.LedgerRaw},
		{"documents", "DocumentsRaw", f.DocumentsRaw},
	} {
		if role.raw == nil {
			continue
		}
		val, err := ctx.LoadModule(f, role.field)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", role.name, err)
		}
		mod, ok := val.(firmsystem.Module)
		if !ok {
			return nil, fmt.Errorf("%s: module %T is not a firm system", role.name, val)
		}
		system := mod.CaddyModule().ID.Name()
		// A records system keeps the firm's invoices too (XPM, Karbon's
		// billing) when the firm names no ledger.
		keepsLedger := role.name == "records" && ledgerless
		roleName := role.name
		keepsEngagements := func() bool { r := engagementsFrom.Load(); return r != nil && *r == roleName }
		opened, label, err := a.openSystem(ctx, f.ID, role.name, mod, model, rec, records, keepsLedger, keepsEngagements, nil)
		if err != nil {
			return nil, err
		}
		if role.name == "records" {
			b.clients, b.jobs = opened.Clients, opened.Jobs
			records = opened.Reader
		}
		keeps[role.name] = opened.Engagements && role.name != "documents"
		systems = append(systems, openedSystem{role.name, system, label, opened})
		// The sync's backfill is the first look at the records: no
		// separate priming.
		b.upstreams = append(b.upstreams, upstreamSystem{role: role.name, name: system, client: opened.Client, webhook: opened.Webhook})
	}
	b.keeps = keeps
	engagements, err := firmsystem.EngagementsRole(f.Engagements, keeps)
	if named := f.Engagements; (named == firmsystem.EngagementsRecords || named == firmsystem.EngagementsLedger) && !f.sets(named) && a.Connect != nil {
		// The role is left to a connection, which keeps the engagements
		// once connected (applyFirm).
		engagements, err = named, nil
	}
	if err != nil {
		return nil, err
	}
	engagementsFrom.Store(&engagements)
	// Where the firm follows connections, a connected system that keeps
	// proposals may keep the engagements no Caddyfile system keeps
	// (applyFirm); until then, and without connections, they are none.
	b.engagements = engagements
	for _, s := range systems {
		if s.role == "records" && s.opened.Ledger != nil && ledgerless {
			// Its invoices are synced as the ledger; its webhook route
			// (records) receives their notifications too.
			b.syncs = append(b.syncs, a.syncFor(f, "ledger", firmsystem.Kinds("ledger"), s.system, s.label, model, s.opened.Ledger, s.opened.Client, rec, cfg))
		}
		b.syncs = append(b.syncs, a.syncFor(f, s.role, firmsystem.KindsOf(s.role, engagements), s.system, s.label, model, s.opened.Reader, s.opened.Client, rec, cfg))
	}
	if len(b.syncs) > 0 {
		// The firm's systems on one vendor account share its allowances.
		readmodel.ShareBudgets(b.syncs)
		if b.placed {
			// Loaded only where the placement puts it (placement.go).
			model.MarkUnloaded()
		} else if err := model.Load(ctx); err != nil {
			return nil, err
		}
		b.model = model
	}
	return b, nil
}

// openSystem opens one of a firm's systems in role on its model, with what
// every system shares (budgets, metrics, upstream state, change sink, the
// locks of OAuth2 refreshes), whether the Caddyfile or a connection names
// it; records is the firm's records system for a linked one, keepsLedger
// tells a records system that its invoices are the firm's,
// keepsEngagements a system that keeps proposals whether they are the
// firm's engagements, and
// grantRefused is told when the vendor refuses a connection's grant (nil
// for a Caddyfile system). label is how people name the system.
func (a *App) openSystem(ctx caddy.Context, firm, role string, mod firmsystem.Module, model *readmodel.Model,
	rec *changes.Recorder, records practice.Reader, keepsLedger bool, keepsEngagements func() bool, grantRefused func(string)) (opened firmsystem.Opened, label string, err error) {
	system := mod.CaddyModule().ID.Name()
	deps := firmsystem.Deps{Firm: firm, Records: records, KeepsLedger: keepsLedger, KeepsEngagements: keepsEngagements, Upstream: upstream.Deps{
		Logger:        a.logger.Named("upstream").With(zap.String("firm", firm), zap.String("system", system)),
		Budget:        a.budget,
		Registerer:    ctx.GetMetricsRegistry(),
		State:         model,
		Recorder:      rec,
		Changes:       a.changes,
		Instance:      system + "/" + firm,
		Notifications: a.notices,
		// One instance at a time refreshes an OAuth2 token, under the
		// leases the syncs take turns with.
		Locks:        a.readStore,
		GrantRefused: grantRefused,
	}}
	if opened, err = mod.Open(deps); err != nil {
		return opened, "", fmt.Errorf("%s %s: %w", role, system, err)
	}
	if label = opened.Label; label == "" {
		label = system
	}
	return opened, label, nil
}

// IngestHandler is the vendor webhook receiver of a firm's system in a
// role (records or ledger), which turns vendor notifications into change
// records for the event pipeline.
func (a *App) IngestHandler(firm, role string) (http.Handler, error) {
	b, ok := a.firms[firm]
	if !ok {
		return nil, fmt.Errorf("no firm %q", firm)
	}
	for _, u := range b.upstreams {
		if u.role == role && u.webhook != nil {
			return u.webhook(a.changes), nil
		}
	}
	return nil, fmt.Errorf("firm %s has no %s system that sends webhooks", firm, role)
}

// upstreamChecks reports each real system's circuit breaker. An open
// breaker affects one firm's role, so it is reported but not critical.
func (a *App) upstreamChecks() []health.Check {
	var checks []health.Check
	for firm, b := range a.firms {
		for _, u := range b.upstreams {
			state := u.client.BreakerState()
			detail := "circuit breaker " + state
			checks = append(checks, health.Check{Name: "upstream " + u.name + "/" + firm, OK: state != "open", Detail: detail})
		}
	}
	slices.SortFunc(checks, func(x, y health.Check) int { return strings.Compare(x.Name, y.Name) })
	return checks
}

// changeSink publishes change records from upstream systems into the event
// pipeline, as the outbox's are: durably before it returns.
type changeSink struct{ app *App }

func (s changeSink) Publish(ctx context.Context, c practice.Change) error {
	return s.app.dispatch.publish(ctx, []practice.Change{c})
}

// FirmWebhook is the receiver of the webhooks of the system named system
// that a firm's Caddyfile block names (/ingest/<firm>/<system>), in role
// order when a package serves two roles (records karbon, ledger karbon);
// false when the firm has no such system that receives webhooks.
func (a *App) FirmWebhook(firm, system string) (http.Handler, bool) {
	b, ok := a.firms[firm]
	if !ok {
		return nil, false
	}
	for _, u := range b.upstreams {
		if u.name == system && u.webhook != nil {
			return u.webhook(a.changes), true
		}
	}
	return nil, false
}
