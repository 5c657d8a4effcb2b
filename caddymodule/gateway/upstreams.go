package gateway

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/docstore"
	"github.com/practicegw/practicegw/adapters/dropbox"
	"github.com/practicegw/practicegw/adapters/gdrive"
	"github.com/practicegw/practicegw/adapters/graph"
	"github.com/practicegw/practicegw/adapters/karbon"
	"github.com/practicegw/practicegw/adapters/upstream"
	"github.com/practicegw/practicegw/adapters/xero"
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
	webhook func(upstream.ChangeSink) http.Handler
	prime   func(context.Context) error
	// primed is set once the first look at the system's records is done;
	// until then a vendor's first report of a change may lack its before.
	primed *atomic.Bool
}

// backends builds a firm's backends: demo records unless the firm names a
// real system for a role.
func (a *App) backends(ctx caddy.Context, f Firm) (*firmBackends, error) {
	d := a.shared.demo
	b := &firmBackends{records: d, clients: d, jobs: d, documents: d, ledger: d}
	deps := func(system string) upstream.Deps {
		return upstream.Deps{
			Logger:     a.logger.Named("upstream").With(zap.String("firm", f.ID), zap.String("system", system)),
			Budget:     a.budget,
			Registerer: ctx.GetMetricsRegistry(),
			State:      a.upstreamState,
			Changes:    a.changes,
			Instance:   system + "/" + f.ID,
		}
	}
	repl := caddy.NewReplacer()

	var clients *karbon.Adapter
	switch f.Records {
	case "", "demo":
	case "karbon":
		if f.Karbon == nil {
			return nil, fmt.Errorf("records karbon needs a karbon block")
		}
		cfg := *f.Karbon
		expand(repl, &cfg)
		cfg.Firm = f.ID
		k, err := karbon.New(cfg, deps("karbon"))
		if err != nil {
			return nil, fmt.Errorf("karbon: %w", err)
		}
		b.records, b.clients, b.jobs, clients = k, k, k, k
		b.upstreams = append(b.upstreams, upstreamSystem{role: "records", name: "karbon", client: k.Upstream(),
			webhook: k.Webhook, prime: func(ctx context.Context) error { return k.Prime(ctx) }, primed: new(atomic.Bool)})
	default:
		return nil, fmt.Errorf("records %q: want demo or karbon", f.Records)
	}
	linked := func(role string) bool { return slices.Contains(f.LinkClients, role) }
	if (linked("ledger") || linked("documents")) && clients == nil {
		return nil, fmt.Errorf("link_clients needs records from a real system (karbon)")
	}

	switch f.Ledger {
	case "", "demo":
	case "xero":
		if f.Xero == nil {
			return nil, fmt.Errorf("ledger xero needs a xero block")
		}
		cfg := *f.Xero
		expand(repl, &cfg)
		cfg.Firm = f.ID
		var opts []xero.Option
		if linked("ledger") {
			opts = append(opts, xero.WithClientResolver(clients))
		}
		x, err := xero.New(cfg, deps("xero"), opts...)
		if err != nil {
			return nil, fmt.Errorf("xero: %w", err)
		}
		b.ledger = x
		b.upstreams = append(b.upstreams, upstreamSystem{role: "ledger", name: "xero", client: x.Upstream(),
			webhook: x.Webhook, prime: x.Prime, primed: new(atomic.Bool)})
	default:
		return nil, fmt.Errorf("ledger %q: want demo or xero", f.Ledger)
	}

	var docOpts []docstore.Option
	if linked("documents") {
		docOpts = append(docOpts, docstore.WithClientResolver(clients))
	}
	switch f.Documents {
	case "", "demo":
	case "sharepoint", "onedrive":
		if f.Graph == nil {
			return nil, fmt.Errorf("documents %s needs its block", f.Documents)
		}
		cfg := *f.Graph
		expand(repl, &cfg)
		cfg.Firm, cfg.Provider = f.ID, f.Documents
		g, err := graph.New(cfg, deps(f.Documents), docOpts...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Documents, err)
		}
		b.documents = g
		b.upstreams = append(b.upstreams, upstreamSystem{role: "documents", name: f.Documents, client: g.Upstream()})
	case "google_drive":
		if f.GDrive == nil {
			return nil, fmt.Errorf("documents google_drive needs its block")
		}
		cfg := *f.GDrive
		expand(repl, &cfg)
		cfg.Firm = f.ID
		g, err := gdrive.New(cfg, deps("google_drive"), docOpts...)
		if err != nil {
			return nil, fmt.Errorf("google_drive: %w", err)
		}
		b.documents = g
		b.upstreams = append(b.upstreams, upstreamSystem{role: "documents", name: "google_drive", client: g.Upstream()})
	case "dropbox":
		if f.Dropbox == nil {
			return nil, fmt.Errorf("documents dropbox needs its block")
		}
		cfg := *f.Dropbox
		expand(repl, &cfg)
		cfg.Firm = f.ID
		x, err := dropbox.New(cfg, deps("dropbox"), docOpts...)
		if err != nil {
			return nil, fmt.Errorf("dropbox: %w", err)
		}
		b.documents = x
		b.upstreams = append(b.upstreams, upstreamSystem{role: "documents", name: "dropbox", client: x.Upstream()})
	default:
		return nil, fmt.Errorf("documents %q: want demo, sharepoint, onedrive, google_drive or dropbox", f.Documents)
	}
	return b, nil
}

// expand replaces placeholders such as {env.KARBON_BEARER} in every string
// of a configuration, in place, so secrets stay out of the adapted JSON and
// are read when the firm is provisioned.
func expand(repl *caddy.Replacer, cfg any) {
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
				if err := u.prime(ctx); err != nil && ctx.Err() == nil {
					a.logger.Warn("first look at upstream records failed; its first changes may be announced as new",
						zap.String("firm", firm), zap.String("system", u.name), zap.Error(err))
					return
				}
				u.primed.Store(true)
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
			if u.primed != nil && !u.primed.Load() {
				detail += "; still taking a first look at its records"
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
