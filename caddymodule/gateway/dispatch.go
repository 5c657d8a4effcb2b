package gateway

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/dispatcher"
	dispatchbolt "github.com/practicegw/practicegw/dispatcher/boltstore"
)

// WebhookConfig tunes webhook delivery. Every field falls back to its
// PRACTICEGW_WEBHOOK_* environment variable, then to the default.
type WebhookConfig struct {
	// BackoffBase is the delay before the first retry. Default
	// {env.PRACTICEGW_WEBHOOK_BACKOFF_BASE}, else 30s.
	BackoffBase string `json:"backoff_base,omitempty"`
	// BackoffFactor multiplies each later delay. Default
	// {env.PRACTICEGW_WEBHOOK_BACKOFF_FACTOR}, else 6 (six attempts span
	// about 13 hours).
	BackoffFactor string `json:"backoff_factor,omitempty"`
	// AllowCIDRs are exempt from the private-address block on webhook
	// URLs, comma-separated. Default {env.PRACTICEGW_WEBHOOK_ALLOW_CIDRS}.
	AllowCIDRs string `json:"allow_cidrs,omitempty"`
	// Timeout bounds one attempt. Default 15s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// BreakerCooldown is how long an endpoint's open circuit breaker
	// defers its deliveries (without spending attempts) before a probe.
	// Default {env.PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN}, else 1m.
	BreakerCooldown string `json:"breaker_cooldown,omitempty"`
}

func (w WebhookConfig) engineConfig(logger *zap.Logger) (dispatcher.Config, error) {
	repl := caddy.NewReplacer()
	get := func(v, env string) string {
		v = repl.ReplaceAll(v, "")
		if v == "" {
			v = os.Getenv(env)
		}
		return strings.TrimSpace(v)
	}
	cfg := dispatcher.Config{Timeout: time.Duration(w.Timeout), Logger: logger}
	if v := get(w.BackoffBase, "PRACTICEGW_WEBHOOK_BACKOFF_BASE"); v != "" {
		d, err := caddy.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("webhook backoff base %q is not a positive duration", v)
		}
		cfg.BackoffBase = d
	}
	if v := get(w.BackoffFactor, "PRACTICEGW_WEBHOOK_BACKOFF_FACTOR"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 1 {
			return cfg, fmt.Errorf("webhook backoff factor %q must be a number of at least 1", v)
		}
		cfg.BackoffFactor = f
	}
	if v := get(w.BreakerCooldown, "PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN"); v != "" {
		d, err := caddy.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("webhook breaker cooldown %q is not a positive duration", v)
		}
		cfg.BreakerCooldown = d
	}
	cidrs, err := ParseCIDRs(get(w.AllowCIDRs, "PRACTICEGW_WEBHOOK_ALLOW_CIDRS"))
	if err != nil {
		return cfg, err
	}
	cfg.AllowCIDRs = cidrs
	return cfg, nil
}

// ParseCIDRs reads a comma-separated list of CIDRs.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("allow-listed CIDR %q: %w", part, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// dispatch owns the webhook engine of one app instance and, when this
// process delivers, its background loops.
type dispatch struct {
	engine  *dispatcher.Engine
	deliver bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func (a *App) provisionDispatch() error {
	mode := caddy.NewReplacer().ReplaceAll(a.Dispatch, "")
	if mode == "" {
		mode = os.Getenv("PRACTICEGW_DISPATCH")
	}
	switch mode {
	case "", "embedded":
		mode = "embedded"
	case "off":
	default:
		return fmt.Errorf("dispatch %q: want embedded or off", mode)
	}
	cfg, err := a.Webhooks.engineConfig(a.logger.Named("dispatcher"))
	if err != nil {
		return err
	}
	store, err := dispatchbolt.New(a.shared.db)
	if err != nil {
		return fmt.Errorf("webhook store: %w", err)
	}
	engine, err := dispatcher.New(cfg, store.Backends())
	if err != nil {
		return fmt.Errorf("webhook engine: %w", err)
	}
	a.dispatch = &dispatch{engine: engine, deliver: mode == "embedded"}
	return nil
}

// start runs delivery and the outbox drain in this process when it
// delivers. The outbox is drained either way, so that no change waits for
// a process that never comes.
func (d *dispatch) start(outbox dispatcher.Outbox, logger *zap.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := d.engine.DrainOutbox(ctx, outbox); err != nil {
			logger.Error("outbox drain stopped", zap.Error(err))
		}
	}()
	if d.deliver {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			if err := d.engine.Run(ctx); err != nil {
				logger.Error("webhook delivery stopped", zap.Error(err))
			}
		}()
	}
}

func (d *dispatch) stop() error {
	if d.cancel != nil {
		d.cancel()
	}
	d.wg.Wait()
	return d.engine.Close()
}

// Dispatcher is the webhook engine the API's event and webhook routes use.
func (a *App) Dispatcher() *dispatcher.Engine { return a.dispatch.engine }
