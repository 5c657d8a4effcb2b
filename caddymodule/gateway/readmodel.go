package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/changes"
	"github.com/practicegw/practicegw/adapters/upstream"
	"github.com/practicegw/practicegw/caddymodule/health"
	"github.com/practicegw/practicegw/internal/practice"
	"github.com/practicegw/practicegw/internal/readmodel"
	redisstore "github.com/practicegw/practicegw/internal/store/redis"
)

// SyncConfig is how often the read model of firms' real systems is
// brought up to date.
type SyncConfig struct {
	// Poll is the interval of incremental polling and of reading the
	// document stores' change feeds. Default {env.PRACTICEGW_SYNC_POLL},
	// else 1m.
	Poll string `json:"poll,omitempty"`
	// Reconcile is the interval of the full comparison that finds
	// deletions. Default {env.PRACTICEGW_SYNC_RECONCILE}, else 24h.
	Reconcile string `json:"reconcile,omitempty"`
}

func (c SyncConfig) config() (readmodel.SyncConfig, error) {
	repl := caddy.NewReplacer()
	var out readmodel.SyncConfig
	for _, s := range []struct {
		value, variable string
		into            *time.Duration
	}{
		{c.Poll, "PRACTICEGW_SYNC_POLL", &out.Poll},
		{c.Reconcile, "PRACTICEGW_SYNC_RECONCILE", &out.Reconcile},
	} {
		v := setting(repl, s.value, s.variable, "")
		if v == "" {
			continue
		}
		d, err := caddy.ParseDuration(v)
		if err != nil || d <= 0 {
			return out, fmt.Errorf("sync: %s %q is not a positive duration", strings.ToLower(strings.TrimPrefix(s.variable, "PRACTICEGW_SYNC_")), v)
		}
		*s.into = d
	}
	return out, nil
}

// roleKinds are the kinds each role's system owns in the read model.
var roleKinds = map[string][]practice.Kind{
	"records":   {practice.Clients, practice.Engagements, practice.Jobs, practice.People},
	"ledger":    {practice.Invoices},
	"documents": {practice.Documents},
}

// readStore is what the read model needs of the app's store backend.
type readStore interface {
	readmodel.Store
	readmodel.Checkpoints
	readmodel.Leases
}

// newModel makes a firm's read model, empty until loadModel; the firm's
// systems are opened on it, since it is the state their change records
// are compared with.
func (a *App) newModel(firm string) *readmodel.Model {
	return readmodel.New(readmodel.Config{Firm: firm, Store: a.readStore, Feed: a.readFeed, Other: a.upstreamState})
}

// openReadStore chooses the read model's backend: the embedded store, or
// Redis, whose feed lets every instance serve what any other wrote.
func (a *App) openReadStore() {
	a.readStore, a.readFeed = a.shared.store.ReadModel(), nil
	if rs, ok := a.state.(*redisstore.Store); ok {
		m := rs.ReadModel()
		a.readStore, a.readFeed = m, m
	}
}

// syncFor builds the sync of one of a firm's systems over the kinds it
// serves in the model.
func (a *App) syncFor(f *Firm, role, system string, model *readmodel.Model, reader practice.Reader,
	client *upstream.Client, rec *changes.Recorder, cfg readmodel.SyncConfig) *readmodel.Syncer {
	store := a.readStore
	kinds := roleKinds[role]
	// A record not copied yet is read from the vendor within a small
	// share of its allowances, and a miss is remembered.
	onDemand := upstream.NewOnDemand(reader, client, a.budget, f.ID+"/"+role)
	for _, k := range kinds {
		model.Serve(k, onDemand)
	}
	s := &readmodel.Syncer{
		System: role, Vendor: system, Label: systemLabel(system), Kinds: kinds, Reader: reader,
		Model: model, Recorder: rec, Sink: a.changes,
		Checkpoints: store, Leases: store, Holder: a.holder,
		Config: cfg,
		Logger: a.logger.Named("sync").With(zap.String("firm", f.ID), zap.String("system", system)),
	}
	if feed, ok := reader.(readmodel.ChangeFeed); ok {
		s.Feed = feed
	}
	if client != nil {
		s.Calls = client.Sent
		s.BudgetPerHour = client.BudgetPerHour()
		s.Budget.Account = client.BudgetAccount()
		for _, al := range client.Allowances() {
			s.Budget.Allowances = append(s.Budget.Allowances, readmodel.Allowance{Limit: al.Limit, Per: al.Per})
		}
	}
	return s
}

// systemLabel is how people name a system, for readiness and the console
// ("Karbon jobs: 3,200 of about 5,000").
func systemLabel(system string) string {
	if l, ok := map[string]string{
		"karbon": "Karbon", "xero": "Xero", "xpm": "Xero Practice Manager", "sharepoint": "SharePoint",
		"onedrive": "OneDrive", "google_drive": "Google Drive", "dropbox": "Dropbox",
	}[system]; ok {
		return l
	}
	return system
}

// holderID names this process in sync leases: the host and a random part,
// so that two processes on one host, or an app and the one a reload
// replaces, are told apart.
func holderID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "/" + hex.EncodeToString(b)
}

// runSyncs starts every firm system's sync; Stop ends them.
func (a *App) runSyncs(ctx context.Context) {
	for _, b := range a.firms {
		for _, s := range b.syncs {
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				s.Run(ctx)
			}()
		}
	}
}

// SyncStatus reports each of a firm's real systems' sync, for the console
// and /readyz.
func (a *App) SyncStatus(firm string) []readmodel.Status {
	b, ok := a.firms[firm]
	if !ok {
		return nil
	}
	out := make([]readmodel.Status, 0, len(b.syncs))
	for _, s := range b.syncs {
		out = append(out, s.Status())
	}
	return out
}

// Resync asks a firm system's sync to reconcile now, wherever it runs.
func (a *App) Resync(ctx context.Context, firm, system string) error {
	b, ok := a.firms[firm]
	if !ok {
		return fmt.Errorf("no firm %q: %w", firm, practice.ErrNotFound)
	}
	for _, s := range b.syncs {
		if s.System == system || s.Vendor == system {
			return s.Resync(ctx)
		}
	}
	return fmt.Errorf("firm %s has no real %s system: %w", firm, system, practice.ErrNotFound)
}

// syncChecks reports each firm system's sync in /readyz: its state, the
// backfill's progress and the age of its data. A firm's sync affects that
// firm's records, so it is reported but not critical.
func (a *App) syncChecks() []health.Check {
	var checks []health.Check
	now := time.Now()
	for firm, b := range a.firms {
		for _, s := range b.syncs {
			st := s.Status()
			detail := st.State
			switch st.State {
			case readmodel.StateBackfilling:
				if p := st.Progress(); p != "" {
					detail += ": " + p
				}
			case readmodel.StateFailing, readmodel.StateLagging:
				detail += ": " + st.Why
			}
			if !st.ConfirmedAt.IsZero() {
				detail += fmt.Sprintf("; data confirmed %s ago", st.Age(now).Round(time.Second))
			}
			if plan := st.Plan.String(); plan != "" {
				detail += "; " + plan
			}
			checks = append(checks, health.Check{Name: "sync " + st.Vendor + "/" + firm, OK: st.State != readmodel.StateFailing, Detail: detail})
		}
	}
	slices.SortFunc(checks, func(x, y health.Check) int { return strings.Compare(x.Name, y.Name) })
	return checks
}
