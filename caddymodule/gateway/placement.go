package gateway

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/health"
	"github.com/practicegw/practicegw/internal/envconfig"
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

// The pace of the membership: a heartbeat every placeEvery, which lapses
// after memberTTL unrenewed. A killed instance's firms are taken by
// others within memberTTL, a placement round and their load.
const (
	placeEvery = time.Second
	memberTTL  = 5 * time.Second
	// followEverySync is how many rounds pass between reads of the sync
	// checkpoints of firms this instance does not hold, for the freshness
	// it reports of them.
	followEverySync = 5
)

// membership is the live instances, kept in the shared store.
type membership interface {
	Heartbeat(ctx context.Context, m readmodel.Member, ttl time.Duration) error
	Members(ctx context.Context) ([]readmodel.Member, error)
	Leave(ctx context.Context, id string) error
}

// placer keeps this instance holding its share of the firms' read models:
// it renews the heartbeat, places every firm from the membership
// (readmodel.Place), loads and syncs the firms placed here, and lets go of
// the others once the instances they are placed on hold them.
type placer struct {
	app      *App
	members  membership
	self     readmodel.Member
	replicas int
	logger   *zap.Logger

	mu sync.Mutex
	// live is the membership as last read; plan the placement it gave.
	live []readmodel.Member
	plan readmodel.Placement
	// held are the firms this instance holds, with their syncs running.
	held map[string]*holding
	// short says that the bounds cannot hold every firm Replicas times.
	short []string
	round int
}

// holding is one firm held here: its syncs run until cancel.
type holding struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// provisionPlacement reads the read_model block: with Redis and a bound,
// this instance holds a share of the firms.
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
	rs, ok := a.readStore.(membership)
	if a.redis == nil || !ok {
		a.logger.Info("read_model memory applies with redis alone: this instance holds every firm")
		return nil
	}
	u, err := url.Parse(c.Advertise)
	if c.Advertise == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("practicegw: read_model advertise %q: with a memory bound, name the URL other instances reach this one at, "+
			"such as http://10.1.2.3:8080 (PRACTICEGW_ADVERTISE)", c.Advertise)
	}
	a.placer = &placer{
		app:      a,
		members:  rs,
		self:     readmodel.Member{ID: a.holder, Advertise: c.Advertise, Memory: bound},
		replicas: c.Replicas,
		logger:   a.logger.Named("placement"),
		held:     map[string]*holding{},
	}
	return nil
}

// run renews this instance's membership and placement until ctx ends,
// then leaves: the others take its firms at once.
func (p *placer) run(ctx context.Context) {
	t := time.NewTicker(placeEvery)
	defer t.Stop()
	// Heard before placing: instances started together (a deploy) see
	// each other at their first placement, rather than each taking every
	// firm its bound allows and letting go a round later.
	p.heartbeat(ctx)
	select {
	case <-ctx.Done():
		p.stop()
		return
	case <-t.C:
	}
	for {
		p.place(ctx)
		select {
		case <-ctx.Done():
			p.stop()
			return
		case <-t.C:
		}
	}
}

// stop ends the syncs of the firms held here and leaves the membership.
func (p *placer) stop() {
	p.mu.Lock()
	held := p.held
	p.held = map[string]*holding{}
	p.mu.Unlock()
	for _, h := range held {
		h.cancel()
		h.done.Wait()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.members.Leave(ctx, p.self.ID); err != nil {
		p.logger.Warn("leaving the membership", zap.Error(err))
	}
}

// place is one round: heartbeat, membership, placement, then hold what is
// placed here and let go of what its new holders have.
func (p *placer) place(ctx context.Context) {
	p.heartbeat(ctx)
	live, err := p.members.Members(ctx)
	if err != nil {
		p.logger.Warn("reading the membership; keeping the last placement", zap.Error(err))
		return
	}
	live = p.withSelf(live)
	firms := p.app.placedFirms()
	plan := readmodel.Place(live, firms, sizesOf(live), p.replicas)
	p.mu.Lock()
	p.live, p.plan, p.short = live, plan, plan.Short
	p.round++
	follow := p.round%followEverySync == 1
	p.mu.Unlock()

	changed := false
	for _, firm := range firms {
		mine := slices.Contains(plan.Holders[firm], p.self.ID)
		switch held := p.holds(firm); {
		case mine && !held:
			changed = p.hold(ctx, firm) || changed
		case !mine && held && handedOver(firm, plan, live, p.self.ID):
			p.release(firm)
			changed = true
		case !mine && !held:
			// Loaded for a request no holder could take (store-served):
			// the bound is kept between requests.
			for _, m := range p.app.firms[firm].models() {
				m.Unload()
			}
			if follow {
				p.app.followSyncs(ctx, firm)
			}
		}
	}
	for _, firm := range p.heldFirms() {
		if !slices.Contains(firms, firm) {
			// Its last connection closed: nothing of it is left to hold.
			p.release(firm)
			changed = true
		}
	}
	if changed {
		p.heartbeat(ctx)
	}
}

// handedOver reports whether the firm's holders under plan, other than
// self, all hold it now, so that self may let go: a firm is never held by
// nobody while it moves. A firm the bounds give no other holder is let
// go too (it is then served from the store), since keeping it would
// break this instance's bound.
func handedOver(firm string, plan readmodel.Placement, live []readmodel.Member, self string) bool {
	ready := readmodel.HoldersOf(firm, live)
	for _, id := range plan.Holders[firm] {
		if id != self && !slices.Contains(ready, id) {
			return false
		}
	}
	return true
}

// withSelf adds this instance to the membership it read when its own
// heartbeat is not in it yet, so it places as the others soon will.
func (p *placer) withSelf(live []readmodel.Member) []readmodel.Member {
	for _, m := range live {
		if m.ID == p.self.ID {
			return live
		}
	}
	return append(live, p.member())
}

// sizesOf is each firm's size as its holders measured it.
func sizesOf(live []readmodel.Member) map[string]int64 {
	out := map[string]int64{}
	for _, m := range live {
		for firm, b := range m.Sizes {
			out[firm] = max(out[firm], b)
		}
	}
	return out
}

// member is this instance as the others see it: the firms it holds and
// their sizes.
func (p *placer) member() readmodel.Member {
	m := p.self
	m.Sizes = map[string]int64{}
	p.mu.Lock()
	for firm := range p.held {
		m.Holds = append(m.Holds, firm)
	}
	p.mu.Unlock()
	slices.Sort(m.Holds)
	for _, firm := range m.Holds {
		m.Sizes[firm] = p.app.firms[firm].size().Bytes
	}
	return m
}

func (p *placer) heartbeat(ctx context.Context) {
	if err := p.members.Heartbeat(ctx, p.member(), memberTTL); err != nil {
		p.logger.Warn("membership heartbeat", zap.Error(err))
	}
}

func (p *placer) holds(firm string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.held[firm]
	return ok
}

// heldFirms are the firms held here.
func (p *placer) heldFirms() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.held))
	for firm := range p.held {
		out = append(out, firm)
	}
	slices.Sort(out)
	return out
}

// hold loads a firm placed here, its connections' models with its own,
// and starts their syncs; only then does the heartbeat say this instance
// holds it.
func (p *placer) hold(ctx context.Context, firm string) bool {
	b := p.app.firms[firm]
	start := time.Now()
	load := func() bool {
		for _, m := range b.models() {
			if err := m.CatchUp(ctx); err != nil {
				p.logger.Warn("loading a firm placed here; trying again next round", zap.String("firm", firm), zap.Error(err))
				return false
			}
		}
		return true
	}
	// Loaded first without holding up the connections' follow loop,
	// then caught up under it: the loop opens and closes connections,
	// and runs their syncs only where the firm is held.
	if !load() {
		return false
	}
	p.app.follow.mu.Lock()
	defer p.app.follow.mu.Unlock()
	if !load() {
		return false
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
	p.mu.Lock()
	p.held[firm] = h
	p.mu.Unlock()
	for _, c := range b.connections() {
		if c.syncsHere() && !c.running() {
			p.app.runConnection(c)
		}
	}
	p.logger.Info("holding firm", zap.String("firm", firm), zap.Int("records", b.size().Records),
		zap.Duration("load", time.Since(start)))
	return true
}

// release stops a firm's syncs here (giving up their leases), its
// connections' too, and drops their records from memory.
func (p *placer) release(firm string) {
	b := p.app.firms[firm]
	p.app.follow.mu.Lock()
	p.mu.Lock()
	h := p.held[firm]
	delete(p.held, firm)
	p.mu.Unlock()
	if h == nil {
		p.app.follow.mu.Unlock()
		return
	}
	for _, c := range b.connections() {
		p.app.stopConnection(c)
		c.model.Unload()
	}
	p.app.follow.mu.Unlock()
	h.cancel()
	h.done.Wait()
	if b.model != nil {
		b.model.Unload()
	}
	p.logger.Info("released firm to its holders", zap.String("firm", firm))
}

// target is where a request for firm goes: this instance when it holds
// the firm (local), else one of the instances that do, chosen at random
// so that their load is shared; none at all when nobody holds it.
func (p *placer) target(firm string) (m readmodel.Member, local, found bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.held[firm]; ok {
		return readmodel.Member{}, true, true
	}
	var ready []readmodel.Member
	for _, m := range p.live {
		if m.ID != p.self.ID && slices.Contains(m.Holds, firm) {
			ready = append(ready, m)
		}
	}
	if len(ready) == 0 {
		return readmodel.Member{}, false, false
	}
	return ready[rand.IntN(len(ready))], false, true
}

// forget drops a member that could not be reached from the view until
// the next round reads the membership again.
func (p *placer) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live = slices.DeleteFunc(slices.Clone(p.live), func(m readmodel.Member) bool { return m.ID == id })
}

// holders are the instances holding firm, by their advertised address.
func (p *placer) holders(firm string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.live {
		if slices.Contains(m.Holds, firm) {
			out = append(out, m.Advertise)
		}
	}
	slices.Sort(out)
	return out
}

// shortOf are the firms the bounds cannot hold Replicas times.
func (p *placer) shortOf() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.short)
}

// placedFirms are the firms with a read model to place: a Caddyfile
// system's, or a connection's open here.
func (a *App) placedFirms() []string {
	var out []string
	for id, b := range a.firms {
		if len(b.models()) > 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// followSyncs reads the checkpoints of a firm held elsewhere, so that
// this instance reports its syncs as their holder does.
func (a *App) followSyncs(ctx context.Context, firm string) {
	b := a.firms[firm]
	for _, s := range b.syncs {
		s.Load(ctx)
	}
	for _, c := range b.connections() {
		for _, s := range c.syncs {
			s.Load(ctx)
		}
	}
}

// check is the placement in /readyz: what this instance holds against its
// bound, and whether the live instances' bounds hold every firm Replicas
// times. Short capacity is not critical (every firm still answers, from
// the store), but it is not ready either: an operator raises the bounds or
// adds instances.
func (p *placer) check() health.Check {
	var bytes int64
	held := p.app.heldFirms()
	for _, firm := range held {
		bytes += p.app.firms[firm].size().Bytes
	}
	detail := fmt.Sprintf("holds %d firms, %s of %s", len(held), humanize.IBytes(uint64(bytes)), humanize.IBytes(uint64(p.self.Memory)))
	c := health.Check{Name: "read model placement", OK: true, Detail: detail}
	if short := p.shortOf(); len(short) > 0 {
		c.OK = false
		c.Detail += fmt.Sprintf("; capacity short: %d firms held fewer than %d times (read from the store, lagging): "+
			"raise read_model memory or add instances", len(short), p.replicas)
	}
	return c
}
