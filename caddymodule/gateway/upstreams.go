package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/changes"
	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/upstream"
	"github.com/practicegw/practicegw/caddymodule/health"
	"github.com/practicegw/practicegw/internal/practice"
)

// upstreamSystem is one of a firm's real systems, as the app needs it
// beyond reading records: its breaker for readiness, its webhook for
// ingest, and a first look at its records so that the first change it
// reports has a "before".
type upstreamSystem struct {
	role    string // records, documents, ledger
	name    string // karbon, xero, sharepoint, ...
	client  *upstream.Client
	webhook func(changes.ChangeSink) http.Handler
	prime   func(context.Context) error
	// looked is set once the first look at the system's records has
	// ended, with why it failed if it did; until then a vendor's first
	// report of a change may lack its before.
	looked *atomic.Pointer[firstLook]
}

// firstLook is how a system's first look at its records ended.
type firstLook struct{ err error }

// backends builds a firm's backends: the systems its configuration names
// for each role, loaded as guest modules, and demo records for the rest.
// Records come first, since a ledger or document store may name its
// clients through them.
func (a *App) backends(ctx caddy.Context, f *Firm) (*firmBackends, error) {
	d := a.shared.demo
	b := &firmBackends{records: d, clients: d, jobs: d, documents: d, ledger: d}
	deps := firmsystem.Deps{Firm: f.ID}
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
		deps.Upstream = upstream.Deps{
			Logger:     a.logger.Named("upstream").With(zap.String("firm", f.ID), zap.String("system", system)),
			Budget:     a.budget,
			Registerer: ctx.GetMetricsRegistry(),
			State:      a.upstreamState,
			Changes:    a.changes,
			Instance:   system + "/" + f.ID,
		}
		opened, err := mod.Open(deps)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", role.name, system, err)
		}
		switch role.name {
		case "records":
			b.records, b.clients, b.jobs = opened.Reader, opened.Clients, opened.Jobs
			deps.Records = opened.Reader
		case "ledger":
			b.ledger = opened.Reader
		case "documents":
			b.documents = opened.Reader
		}
		u := upstreamSystem{role: role.name, name: system, client: opened.Client, webhook: opened.Webhook, prime: opened.Prime}
		if u.prime != nil {
			u.looked = new(atomic.Pointer[firstLook])
		}
		b.upstreams = append(b.upstreams, u)
	}
	return b, nil
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

// prime gives each real system a first look at its records in the
// background, so the first change a vendor reports is compared with what
// was there rather than announced as new.
func (a *App) prime(ctx context.Context) {
	for firm, b := range a.firms {
		for _, u := range b.upstreams {
			if u.prime == nil {
				continue
			}
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				start := time.Now()
				if err := u.prime(ctx); err != nil {
					if ctx.Err() == nil {
						a.logger.Warn("first look at upstream records failed; its first changes may be announced as new",
							zap.String("firm", firm), zap.String("system", u.name), zap.Error(err))
						u.looked.Store(&firstLook{err: err})
					}
					return
				}
				u.looked.Store(&firstLook{})
				a.logger.Debug("primed upstream", zap.String("firm", firm), zap.String("system", u.name),
					zap.Duration("took", time.Since(start)))
			}()
		}
	}
}

// upstreamChecks reports each real system's circuit breaker. An open
// breaker affects one firm's role, so it is reported but not critical.
func (a *App) upstreamChecks() []health.Check {
	var checks []health.Check
	for firm, b := range a.firms {
		for _, u := range b.upstreams {
			state := u.client.BreakerState()
			detail := "circuit breaker " + state
			if u.looked != nil {
				switch look := u.looked.Load(); {
				case look == nil:
					detail += "; still taking a first look at its records"
				case look.err != nil:
					detail += "; its first look at its records failed, so its first changes may be announced as new: " + look.err.Error()
				}
			}
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
