// Package cluster is the gateway instances that share the firms when each
// holds a bounded part of them: the membership (a heartbeat every instance
// renews in the shared store), the placement (which instances hold each
// firm, readmodel.Place over the membership, the same on every instance
// without their talking) and the forwarding of a request for a firm held
// elsewhere to one of its holders, signed (forward.go).
//
// The cluster decides; the firms' runtime holds. The cluster asks the
// runtime through Firms, which it declares, to hold a firm placed here and
// to let go of one placed elsewhere once its new holders hold it, and says
// in its heartbeat what the runtime holds.
package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/credential"
)

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

// Membership is the live instances, kept in the shared store.
type Membership interface {
	Heartbeat(ctx context.Context, m readmodel.Member, ttl time.Duration) error
	Members(ctx context.Context) ([]readmodel.Member, error)
	Leave(ctx context.Context, id string) error
}

// What the cluster asks of the firms' runtime on this instance.
type (
	// placed are the firms with a read model to place, and what each
	// holds in memory here.
	placed interface {
		// Placed are the firms with a read model, sorted.
		Placed() []string
		Size(firm string) readmodel.Size
	}
	// holder holds the firms placed here and lets go of the others.
	holder interface {
		// Hold loads firm's copies here and runs their syncs; an error
		// leaves it unheld, to be tried again next round.
		Hold(ctx context.Context, firm string) error
		// Release stops firm's syncs here (giving up their leases) and
		// drops its copies from memory.
		Release(firm string)
		// Holds reports whether firm is held here; Held are the firms
		// that are, sorted.
		Holds(firm string) bool
		Held() []string
		// Idle is a round of a firm neither placed nor held here: what a
		// read loaded for want of a holder is dropped, and with follow
		// its syncs' checkpoints are read for the freshness it reports.
		Idle(ctx context.Context, firm string, follow bool)
	}
	// served says which of a firm's kinds a holder answers from its copy.
	served interface {
		FromModel(firm string, k practice.Kind) bool
	}
)

// Credentials is the credential registry, as the holder of a forwarded
// request asks it.
type Credentials interface {
	// Standing is c as the registry knows it now, or an error when it
	// was revoked on any instance or the registry cannot vouch for it.
	Standing(c *credential.Credential) (*credential.Credential, error)
}

// Firms is the firms' runtime of this instance, as the cluster places it.
type Firms interface {
	placed
	holder
	served
}

// Config is this instance's place in the cluster.
type Config struct {
	// ID names this instance (its sync leases' holder); Advertise is the
	// URL the others reach it at; Memory the bound of its read models.
	ID        string
	Advertise string
	Memory    int64
	// Replicas is how many instances hold each firm.
	Replicas int
	// ForwardKey signs the requests forwarded between instances: derived
	// from the secrets key every instance shares.
	ForwardKey []byte
	// Nonces remembers the forwarded requests taken, across instances:
	// without it none is taken.
	Nonces Nonces
	// Credentials says whether a forwarded request's credential still
	// stands: the credential registry, which follows the revocations.
	Credentials Credentials
	// TLS is how this instance reaches the others' internal listeners
	// when they speak TLS (InternalTLS.Configs); nil for plain HTTP on a
	// private network.
	TLS *tls.Config
	// Clock stamps forwarded requests and judges their time. Default
	// time.Now.
	Clock func() time.Time
}

// Cluster keeps this instance holding its share of the firms' read
// models: it renews the heartbeat, places every firm from the membership,
// has the runtime hold the firms placed here, and lets go of the others
// once the instances they are placed on hold them.
type Cluster struct {
	members     Membership
	firms       Firms
	self        readmodel.Member
	replicas    int
	key         []byte
	nonces      Nonces
	credentials Credentials
	client      *http.Client
	now         func() time.Time
	logger      *zap.Logger

	mu sync.Mutex
	// live is the membership as last read; plan the placement it gave.
	live []readmodel.Member
	plan readmodel.Placement
	// short says that the bounds cannot hold every firm Replicas times.
	short []string
	round int
}

// New makes this instance's part of the cluster over members, placing
// firms.
func New(cfg Config, members Membership, firms Firms, logger *zap.Logger) *Cluster {
	if logger == nil {
		logger = zap.NewNop()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Cluster{
		members:     members,
		firms:       firms,
		self:        readmodel.Member{ID: cfg.ID, Advertise: cfg.Advertise, Memory: cfg.Memory},
		replicas:    cfg.Replicas,
		key:         cfg.ForwardKey,
		nonces:      cfg.Nonces,
		credentials: cfg.Credentials,
		client:      newForwardClient(cfg.TLS),
		now:         cfg.Clock,
		logger:      logger,
	}
}

// Run renews this instance's membership and placement until ctx ends,
// then lets go of what it holds and leaves: the others take its firms at
// once.
func (c *Cluster) Run(ctx context.Context) {
	t := time.NewTicker(placeEvery)
	defer t.Stop()
	defer c.stop()
	// Heard before placing: instances started together (a deploy) see
	// each other at their first placement, rather than each taking every
	// firm its bound allows and letting go a round later.
	c.Heartbeat(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.Place(ctx)
	}
}

// stop ends the syncs of the firms held here and leaves the membership.
func (c *Cluster) stop() {
	for _, firm := range c.firms.Held() {
		c.firms.Release(firm)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.members.Leave(ctx, c.self.ID); err != nil {
		c.logger.Warn("leaving the membership", zap.Error(err))
	}
}

// Place is one round: heartbeat, membership, placement, then hold what is
// placed here and let go of what its new holders have. Run takes one a
// second; a test takes them in the order it chooses.
func (c *Cluster) Place(ctx context.Context) {
	c.Heartbeat(ctx)
	live, err := c.members.Members(ctx)
	if err != nil {
		c.logger.Warn("reading the membership; keeping the last placement", zap.Error(err))
		return
	}
	live = c.withSelf(live)
	firms := c.firms.Placed()
	plan := readmodel.Place(live, firms, sizesOf(live), c.replicas)
	c.mu.Lock()
	c.live, c.plan, c.short = live, plan, plan.Short
	c.round++
	follow := c.round%followEverySync == 1
	c.mu.Unlock()

	changed := false
	for _, firm := range firms {
		mine := slices.Contains(plan.Holders[firm], c.self.ID)
		switch held := c.firms.Holds(firm); {
		case mine && !held:
			changed = c.hold(ctx, firm) || changed
		case !mine && held && handedOver(firm, plan, live, c.self.ID):
			c.release(firm)
			changed = true
		case !mine && !held:
			// Loaded for a request no holder could take (store-served):
			// the bound is kept between requests.
			c.firms.Idle(ctx, firm, follow)
		}
	}
	for _, firm := range c.firms.Held() {
		if !slices.Contains(firms, firm) {
			// Its last connection closed: nothing of it is left to hold.
			c.release(firm)
			changed = true
		}
	}
	if changed {
		c.Heartbeat(ctx)
	}
}

// hold has the runtime hold a firm placed here; only then does the
// heartbeat say this instance holds it.
func (c *Cluster) hold(ctx context.Context, firm string) bool {
	start := time.Now()
	if err := c.firms.Hold(ctx, firm); err != nil {
		c.logger.Warn("loading a firm placed here; trying again next round", zap.String("firm", firm), zap.Error(err))
		return false
	}
	c.logger.Info("holding firm", zap.String("firm", firm), zap.Int("records", c.firms.Size(firm).Records),
		zap.Duration("load", time.Since(start)))
	return true
}

func (c *Cluster) release(firm string) {
	c.firms.Release(firm)
	c.logger.Info("released firm to its holders", zap.String("firm", firm))
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
func (c *Cluster) withSelf(live []readmodel.Member) []readmodel.Member {
	for _, m := range live {
		if m.ID == c.self.ID {
			return live
		}
	}
	return append(live, c.member())
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
func (c *Cluster) member() readmodel.Member {
	m := c.self
	m.Holds = c.firms.Held()
	m.Sizes = map[string]int64{}
	for _, firm := range m.Holds {
		m.Sizes[firm] = c.firms.Size(firm).Bytes
	}
	return m
}

// Heartbeat renews this instance's membership, with what it holds now.
func (c *Cluster) Heartbeat(ctx context.Context) {
	if err := c.members.Heartbeat(ctx, c.member(), memberTTL); err != nil {
		c.logger.Warn("membership heartbeat", zap.Error(err))
	}
}

// target is where a request for firm goes: this instance when it holds
// the firm (local), else one of the instances that do, chosen at random
// so that their load is shared; none at all when nobody holds it.
func (c *Cluster) target(firm string) (m readmodel.Member, local, found bool) {
	if c.firms.Holds(firm) {
		return readmodel.Member{}, true, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var ready []readmodel.Member
	for _, m := range c.live {
		if m.ID != c.self.ID && slices.Contains(m.Holds, firm) {
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
func (c *Cluster) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = slices.DeleteFunc(slices.Clone(c.live), func(m readmodel.Member) bool { return m.ID == id })
}

// Holders are the instances holding firm, by their advertised address.
func (c *Cluster) Holders(firm string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.live {
		if slices.Contains(m.Holds, firm) {
			out = append(out, m.Advertise)
		}
	}
	slices.Sort(out)
	return out
}

// Placement is the last placement: the instances each firm is placed on,
// by id.
func (c *Cluster) Placement() readmodel.Placement {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.plan
}

// shortOf are the firms the bounds cannot hold Replicas times.
func (c *Cluster) shortOf() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.short)
}

// Check is the placement as /readyz shows it: what this instance holds
// against its bound, and whether the live instances' bounds hold every
// firm Replicas times. Short capacity is not critical (every firm still
// answers, from the store), but it is not ready either: an operator raises
// the bounds or adds instances.
func (c *Cluster) Check() (ok bool, detail string) {
	var bytes int64
	held := c.firms.Held()
	for _, firm := range held {
		bytes += c.firms.Size(firm).Bytes
	}
	detail = fmt.Sprintf("holds %d firms, %s of %s", len(held), humanize.IBytes(uint64(bytes)), humanize.IBytes(uint64(c.self.Memory)))
	if short := c.shortOf(); len(short) > 0 {
		return false, detail + fmt.Sprintf("; capacity short: %d firms held fewer than %d times (read from the store, lagging): "+
			"raise read_model memory or add instances", len(short), c.replicas)
	}
	return true, detail
}
