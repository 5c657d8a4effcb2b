package gateway

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"

	"github.com/caddyserver/caddy/v2"

	"github.com/practicegw/practicegw/cluster"
	"github.com/practicegw/practicegw/internal/envconfig"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// ReadModelConfig bounds the memory the read models take on each
// instance. Without a bound (the default), or without Redis, every
// instance holds every firm's records, as one instance alone must.
type ReadModelConfig struct {
	// Memory is the most this instance's read models may take ("512MiB",
	// "4GiB"), counted as readmodel.Model.Size counts them: records,
	// their indexes and tombstones. Set, with Redis, each firm is held
	// by Replicas of the live instances (PRACTICEGW_READ_MODEL_MEMORY).
	Memory string `json:"memory,omitempty"`
	// Replicas is how many instances hold each firm. Default 2
	// (PRACTICEGW_READ_MODEL_REPLICAS).
	Replicas int `json:"replicas,omitempty"`
	// Advertise is the URL the other instances reach this one at, which
	// they send the requests of the firms it holds to; required with a
	// bound (PRACTICEGW_ADVERTISE).
	Advertise string `json:"advertise,omitempty"`
}

// provisionPlacement reads the read_model block: with Redis and a bound,
// this instance holds a share of the firms, placed by the cluster.
func (a *App) provisionPlacement() error {
	c := a.ReadModel
	repl := caddy.NewReplacer()
	c.Memory, c.Advertise = expand(repl, c.Memory), expand(repl, c.Advertise)
	if c.Memory == "" {
		return nil
	}
	bound, err := envconfig.ParseSize(c.Memory)
	if err != nil {
		return fmt.Errorf("practicegw: read_model memory: %w", err)
	}
	if c.Replicas < 0 {
		return fmt.Errorf("practicegw: read_model replicas %d must be positive", c.Replicas)
	}
	if c.Replicas == 0 {
		c.Replicas = 2
	}
	rs, ok := a.readStore.(cluster.Membership)
	if a.redis == nil || !ok {
		a.logger.Info("read_model memory applies with redis alone: this instance holds every firm")
		return nil
	}
	u, err := url.Parse(c.Advertise)
	if c.Advertise == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("practicegw: read_model advertise %q: with a memory bound, name the URL other instances reach this one at, "+
			"such as http://10.1.2.3:8080 (PRACTICEGW_ADVERTISE)", c.Advertise)
	}
	nonces, _ := a.store.(cluster.Nonces)
	a.cluster = cluster.New(cluster.Config{ID: a.holder, Advertise: c.Advertise, Memory: bound, Replicas: c.Replicas,
		ForwardKey: a.shared.secrets.Derive("forwarded requests v1"), Nonces: nonces, Credentials: a.registry},
		rs, a, a.logger.Named("placement"))
	return nil
}

// What the cluster asks of the firms here (cluster.Firms).

// holding is one firm's Caddyfile syncs running where it is held.
type holding struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// Placed are the firms with a read model to place: a Caddyfile
// system's, or a connection's open here.
func (a *App) Placed() []string {
	var out []string
	for id, b := range a.firms {
		if len(b.models()) > 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Size is what a firm's models hold in memory here.
func (a *App) Size(firm string) readmodel.Size {
	b := a.firms[firm]
	if b == nil {
		return readmodel.Size{}
	}
	return b.size()
}

// Holds reports whether this instance holds the firm's models and runs
// their syncs: every instance does without a bound.
func (a *App) Holds(firm string) bool {
	b := a.firms[firm]
	return b != nil && (!b.placed || b.held.Load())
}

// Held are the firms whose models this instance holds in memory: those
// placed here, or every firm with a model (its Caddyfile systems' or its
// connections') when every instance holds every firm.
func (a *App) Held() []string {
	var out []string
	for id, b := range a.firms {
		if len(b.models()) > 0 && a.Holds(id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Hold loads a firm placed here, its connections' models with its own,
// and starts their syncs.
func (a *App) Hold(ctx context.Context, firm string) error {
	b := a.firms[firm]
	load := func() error {
		for _, m := range b.models() {
			if err := m.CatchUp(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	// Loaded first without holding up the connections' follow loop,
	// then caught up under it: the loop opens and closes connections,
	// and runs their syncs only where the firm is held.
	if err := load(); err != nil {
		return err
	}
	a.follow.mu.Lock()
	defer a.follow.mu.Unlock()
	if err := load(); err != nil {
		return err
	}
	hctx, cancel := context.WithCancel(ctx)
	h := &holding{cancel: cancel}
	for _, s := range b.syncs {
		h.done.Add(1)
		go func() {
			defer h.done.Done()
			s.Run(hctx)
		}()
	}
	b.holding = h
	b.held.Store(true)
	for _, c := range b.connections() {
		if c.syncsHere() && !c.running() {
			a.runConnection(c)
		}
	}
	return nil
}

// Release stops a firm's syncs here (giving up their leases), its
// connections' too, and drops their records from memory.
func (a *App) Release(firm string) {
	b := a.firms[firm]
	a.follow.mu.Lock()
	h := b.holding
	b.holding = nil
	if !b.held.Swap(false) {
		a.follow.mu.Unlock()
		return
	}
	for _, c := range b.connections() {
		a.stopConnection(c)
		c.model.Unload()
	}
	a.follow.mu.Unlock()
	h.cancel()
	h.done.Wait()
	if b.model != nil {
		b.model.Unload()
	}
}

// Idle is a round of a firm not held here: a model loaded for a request
// no holder could take (store-served) is dropped, so that the bound is
// kept between requests; with follow, the checkpoints of its syncs are
// read, so that this instance reports them as their holder does.
func (a *App) Idle(ctx context.Context, firm string, follow bool) {
	b := a.firms[firm]
	for _, m := range b.models() {
		m.Unload()
	}
	if !follow {
		return
	}
	for _, s := range b.syncs {
		s.Load(ctx)
	}
	for _, c := range b.connections() {
		for _, s := range c.syncs {
			s.Load(ctx)
		}
	}
}

// FromModel reports whether one of the firm's read models serves k here,
// which a holder answers.
func (a *App) FromModel(firm string, k practice.Kind) bool {
	b, ok := a.firms[firm]
	return ok && b.servesFromModel(k)
}
