package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/caddymodule/health"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// SyncConfig is how often the read model of firms' real systems is
// brought up to date.
type SyncConfig struct {
	// Poll is the interval of incremental polling and of reading the
	// document stores' change feeds. Default 1m (PRACTICEGW_SYNC_POLL).
	Poll caddy.Duration `json:"poll,omitempty"`
	// Reconcile is the interval of the full comparison that finds
	// deletions. Default 24h (PRACTICEGW_SYNC_RECONCILE).
	Reconcile caddy.Duration `json:"reconcile,omitempty"`
}

func (c SyncConfig) config() (readmodel.SyncConfig, error) {
	out := readmodel.SyncConfig{Poll: time.Duration(c.Poll), Reconcile: time.Duration(c.Reconcile)}
	if out.Poll < 0 || out.Reconcile < 0 {
		return out, fmt.Errorf("sync: poll %s and reconcile %s must be positive", out.Poll, out.Reconcile)
	}
	return out, nil
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
	return readmodel.New(readmodel.Config{Firm: firm, Store: a.readStore, Updates: a.readFeed, Other: a.upstreamState,
		Letters: a.lettersOf(firm)})
}

// lettersOf are firm's letters, one for every copy of its systems: an
// engagement of its records or ledger links a letter its document store's
// copy holds, whichever of them the Caddyfile names or a connection made.
func (a *App) lettersOf(firm string) *practice.Letters {
	if a.letters == nil {
		return nil // not provisioned (a test's App): the model keeps its own
	}
	l, _ := a.letters.LoadOrStore(firm, practice.NewLetters())
	return l.(*practice.Letters)
}

// openReadStore chooses the read model's backend: the embedded store, or
// Redis, whose feed lets every instance serve what any other wrote.
func (a *App) openReadStore() {
	a.readStore, a.readFeed = a.shared.store.ReadModel(), nil
	if rs, ok := a.store.(*redisstore.Store); ok {
		m := rs.ReadModel()
		a.readStore, a.readFeed = m, m
	}
}

// syncFor builds the sync of one of a firm's systems in role over the
// kinds it serves in the model (firmsystem.KindsOf); label is how people
// name the system.
func (a *App) syncFor(f *Firm, role string, kinds []practice.Kind, system, label string, model *readmodel.Model, reader practice.Reader,
	client *upstream.Client, rec *changes.Recorder, cfg readmodel.SyncConfig) *readmodel.Syncer {
	store := a.readStore
	// A record not copied yet is read from the vendor within a small
	// share of its allowances, and a miss is remembered.
	onDemand := upstream.NewOnDemand(reader, client, a.budget, f.ID+"/"+role)
	for _, k := range kinds {
		model.Serve(k, onDemand)
	}
	opts := []readmodel.SyncOption{
		readmodel.WithLogger(a.logger.Named("sync").With(zap.String("firm", f.ID), zap.String("system", system))),
	}
	if client != nil {
		budget := readmodel.SyncBudget{Account: client.BudgetAccount()}
		for _, al := range client.Allowances() {
			budget.Allowances = append(budget.Allowances, readmodel.Allowance{Limit: al.Limit, Per: al.Per})
		}
		opts = append(opts, readmodel.WithVendorCalls(client.Sent, client.BudgetPerHour()), readmodel.WithBudget(budget))
	}
	return readmodel.NewSyncer(
		readmodel.SyncedSystem{Role: role, System: system, Label: label, Kinds: kinds, Reader: reader},
		readmodel.SyncDeps{Model: model, Recorder: rec, Sink: a.changes, Checkpoints: store, Leases: store, Holder: a.holder},
		cfg, opts...)
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
		if b.placed {
			// Run by the placement, where the firm is held.
			continue
		}
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
	for _, c := range b.connections() {
		out = append(out, c.status()...)
	}
	if a.cluster != nil && len(b.models()) > 0 {
		held := a.cluster.Holders(firm)
		for i := range out {
			out[i].HeldBy = held
		}
	}
	return out
}

// Resync asks a firm system's sync to reconcile now, wherever it runs.
func (a *App) Resync(ctx context.Context, firm, system string) error {
	b, ok := a.firms[firm]
	if !ok {
		return fmt.Errorf("no firm %q: %w", firm, practice.ErrNotFound)
	}
	syncs := slices.Clone(b.syncs)
	for _, c := range b.connections() {
		syncs = append(syncs, c.syncs...)
	}
	for _, s := range syncs {
		if s.Role() == system || s.System() == system {
			return s.Resync(ctx)
		}
	}
	return fmt.Errorf("firm %s has no real %s system: %w", firm, system, practice.ErrNotFound)
}

// syncChecks reports each firm system's sync in /readyz. A firm's sync
// affects that firm's records, so it is reported but not critical.
func (a *App) syncChecks() []health.Check {
	var checks []health.Check
	now := time.Now()
	for _, st := range a.allSyncStatus() {
		checks = append(checks, syncCheck(st, now))
	}
	slices.SortFunc(checks, func(x, y health.Check) int { return strings.Compare(x.Name, y.Name) })
	return checks
}

// syncCheck is one sync as the public probe shows it: its state, the
// backfill's figures and the age of its data, never why it lags or fails.
// The why is the vendor's own words (request paths, paging tokens, a piece
// of its answer), so it goes only to the log (as the check's Err), the
// admin endpoint and the firm's console.
func syncCheck(st readmodel.Status, now time.Time) health.Check {
	detail := st.State
	if st.State == readmodel.StateBackfilling {
		if p := st.Progress(); p != "" {
			detail += ": " + p
		}
	}
	if !st.ConfirmedAt.IsZero() {
		detail += fmt.Sprintf("; data confirmed %s ago", st.Age(now).Round(time.Second))
	}
	if plan := st.Plan.String(); plan != "" {
		detail += "; " + plan
	}
	c := health.Check{Name: "sync " + st.System + "/" + st.Firm, OK: st.State != readmodel.StateFailing, Detail: detail}
	if st.Why != "" {
		c.Err = errors.New(st.Why)
	}
	return c
}
