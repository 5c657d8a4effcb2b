// Package ratelimit holds each credential to its request rate and counts
// its requests per hour.
//
// The limiter is GCRA (see gcra.go), in this process or, with Redis, in one
// Lua script that also counts usage, so a request costs one round trip and
// every gateway instance shares one bucket per credential. Concurrent
// requests share their round trips: one script call decides a batch of
// them, each as if alone (pipeline.go). When Redis does not answer within the timeout
// the configured fallback decides, and Redis takes over again by itself
// once it answers.
//
// Handler is the Caddy module http.handlers.practicegw_ratelimit, a thin
// layer over Limiter: it reads the credential auth placed in the request,
// advertises the policy and headroom in RateLimit-Policy and RateLimit
// (IETF httpapi ratelimit-headers draft) on every response, and answers
// 429 rate_limited with Retry-After when the credential is over its rate.
package ratelimit

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/internal/envconfig"
	"github.com/practicegw/practicegw/store/credential"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// policyName names the one policy in RateLimit-Policy and RateLimit.
const policyName = `"default"`

// Handler enforces each credential's rate limit. Requests without a
// credential (such as the public OpenAPI document) pass untouched.
//
// A credential has one bucket: handlers with the same redis, timeout and
// fallback, in any site or route, share one Limiter and so one bucket per
// credential, and a Caddy reload keeps it.
type Handler struct {
	// Default is the ceiling of credentials without their own: "N/s",
	// "N/m" or "N/h". Placeholders are expanded. Default: the practicegw
	// app's rate_limit (PRACTICEGW_RATE_LIMIT, else 7200/h: two requests
	// a second on average, with an hour's quota available at once).
	Default string `json:"default,omitempty"`

	// Burst is how many requests a credential may make at once after a
	// quiet spell. Default: the ceiling's own N, so a whole window's quota
	// may be spent at once; a ceiling with a smaller N keeps its N.
	Burst int64 `json:"burst,omitempty"`

	// Redis is the redis:// (or rediss://, TLS) URL whose buckets and
	// usage counters every instance shares. Placeholders are expanded.
	// Default: the practicegw app's redis (PRACTICEGW_REDIS), so that rate
	// limits live where the rest of the shared state does; empty keeps
	// both in this process. A rediss:// connection uses the app's
	// redis_tls files.
	Redis string `json:"redis,omitempty"`

	// Timeout bounds each Redis call on a request's path. Default: 50ms.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// BatchInterval, when set, spaces the starts of round trips to Redis
	// once requests share them, so that more requests share each: a
	// request waits at most this long for others to join its round trip.
	// It trades latency for Redis's CPU, for when many gateways load one
	// Redis. Default: none; each batch goes as soon as the last returns.
	BatchInterval caddy.Duration `json:"batch_interval,omitempty"`

	// Fallback decides while Redis is unreachable: "local" (this
	// process's own limiter), "allow" (admit all) or "deny" (429 with
	// Retry-After: 1). Default: local.
	Fallback string `json:"fallback,omitempty"`

	def     *policy // for credentials without a rate of their own
	cfg     Config
	limiter *Limiter
	// releaseUsage gives back the app's usage store (Host.UsageStore).
	releaseUsage func()
	metrics      *metrics
	logger       *zap.Logger
	// policies holds the policy of each rate credentials carry, by its
	// spelling: a handful of rates serve every credential, and parsing
	// and spelling them once spares every request the work.
	policies *sync.Map // string → *policy
}

// policy is a ceiling as the handler applies it, with its
// RateLimit-Policy value, which is the same on every response.
type policy struct {
	rate   Rate
	header string
}

func newPolicy(r Rate) *policy {
	return &policy{rate: r, header: policyName + ";q=" + strconv.FormatInt(r.Limit, 10) +
		";w=" + strconv.FormatInt(int64(r.Window/time.Second), 10)}
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.practicegw_ratelimit",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision parses the config and acquires the process's Limiter for it.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger(h)
	repl := caddy.NewReplacer()

	host, _ := ctx.AppIfConfigured("practicegw")
	app, _ := host.(Host)
	shared := AppSettings{Rate: envconfig.Default("PRACTICEGW_RATE_LIMIT")}
	if app != nil {
		shared = app.LimiterSettings()
	}
	def := strings.TrimSpace(repl.ReplaceAll(h.Default, ""))
	if def == "" {
		def = shared.Rate
	}
	rate, err := ParseRate(def)
	if err != nil {
		return fmt.Errorf("default: %w", err)
	}
	if h.Burst < 0 {
		return fmt.Errorf("burst %d: want at least 1", h.Burst)
	}
	rate.Burst = h.Burst
	h.def = newPolicy(rate)
	h.policies = new(sync.Map)

	redis := strings.TrimSpace(repl.ReplaceAll(h.Redis, ""))
	if redis == "" {
		redis = shared.Redis
	}
	h.cfg = Config{
		Redis:         redis,
		RedisTLS:      shared.RedisTLS,
		Timeout:       time.Duration(h.Timeout),
		BatchInterval: time.Duration(h.BatchInterval),
		Fallback:      Fallback(h.Fallback),
		// The Limiter outlives this config, and with it this config's log
		// writers; Caddy's default logger lives as long as the process.
		Logger: caddy.Log().Named("http.handlers.practicegw_ratelimit"),
	}
	if h.cfg.Fallback == "" {
		h.cfg.Fallback = FallbackLocal
	}
	if err := h.cfg.Fallback.check(); err != nil {
		return err
	}
	if h.metrics, err = newMetrics(ctx.GetMetricsRegistry(), h.cfg.Fallback); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	if app != nil {
		h.cfg.Usage, h.releaseUsage = app.UsageStore()
	}
	if h.limiter, err = Acquire(h.cfg); err != nil {
		h.release()
		return err
	}
	if app != nil {
		app.AttachLimiter(h.limiter, h.RateFor)
	}
	return nil
}

// Host is what the practicegw app offers and wants: the settings a
// handler that names none takes, somewhere to keep hourly usage, and the
// limiter itself so that credential listings and the console can show
// usage and headroom.
type Host interface {
	LimiterSettings() AppSettings
	// UsageStore is where hourly usage is kept, open until release is
	// called: the handler releases it only once the limiter it shares
	// has written what it holds, whichever of the config's modules is
	// cleaned up first.
	UsageStore() (store UsageStore, release func())
	AttachLimiter(l *Limiter, rateFor func(*credential.Credential) Rate)
}

// AppSettings are the practicegw app's settings, placeholders expanded,
// that a handler which names none of its own takes: the app's
// configuration is the one place they come from, the environment's
// defaults included (internal/envconfig).
type AppSettings struct {
	// Rate is the ceiling of credentials without their own.
	Rate string
	// Redis is the URL of the Redis the app keeps shared state in, empty
	// for none; RedisTLS the files a rediss:// connection is made with.
	Redis    string
	RedisTLS redisstore.TLSFiles
}

// Cleanup releases the Limiter, which writes the usage it holds when no
// config holds it any more, then the usage store it wrote to.
func (h *Handler) Cleanup() error {
	defer h.release()
	if h.limiter == nil {
		return nil
	}
	return Release(h.cfg)
}

// release gives back the app's usage store, once.
func (h *Handler) release() {
	if h.releaseUsage != nil {
		h.releaseUsage()
		h.releaseUsage = nil
	}
}

// Limiter is the handler's limiter, for the console's usage and headroom.
func (h *Handler) Limiter() *Limiter { return h.limiter }

// RateFor returns the ceiling the handler applies to cred.
func (h *Handler) RateFor(cred *credential.Credential) Rate { return h.policyFor(cred).rate }

func (h *Handler) policyFor(cred *credential.Credential) *policy {
	if cred.RateLimit == "" {
		return h.def
	}
	if p, ok := h.policies.Load(cred.RateLimit); ok {
		return p.(*policy)
	}
	r, err := ParseRate(cred.RateLimit)
	if err != nil {
		// Issuing a credential validates its rate; a bad one here is old
		// or hand-edited data, and the default is the safe reading.
		h.logger.Debug("credential rate limit unreadable; applying the default",
			zap.String("credential", cred.ID), zap.Error(err))
		return h.def
	}
	r.Burst = h.def.rate.Burst
	p, _ := h.policies.LoadOrStore(cred.RateLimit, newPolicy(r))
	return p.(*policy)
}

// The headers' canonical spellings, set directly: Header.Set would
// canonicalize RateLimit-Policy into a new string on every response.
const (
	headerPolicy    = "Ratelimit-Policy"
	headerRateLimit = "Ratelimit"
)

// ServeHTTP decides the request, advertises the credential's headroom on
// the response whatever the outcome, and answers a refusal itself.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	cred, ok := auth.FromContext(r.Context())
	if !ok || cred == nil {
		return next.ServeHTTP(w, r)
	}
	p := h.policyFor(cred)
	if conditional(r) {
		// Booked only if the answer is not 304 Not Modified: it needs
		// headroom to be served, but an unchanged page costs nothing.
		if d := h.decide(r, cred, p, false); d.Allowed {
			bw := &bookOnAnswer{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w},
				h: h, r: r, cred: cred, p: p, peeked: d}
			err := next.ServeHTTP(bw, r)
			if !bw.answered {
				// An error for Caddy's error routes to write: booked as
				// any other answer.
				h.book(w, r, cred, p)
			}
			return err
		}
	}
	if !h.book(w, r, cred, p) {
		return h.refuse(w, r, p)
	}
	return next.ServeHTTP(w, r)
}

// conditional reports whether r is a read that may be answered 304.
func conditional(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get("If-None-Match") != ""
}

// decide asks the limiter, booking the request when consume is set, and
// observes the decision.
func (h *Handler) decide(r *http.Request, cred *credential.Credential, p *policy, consume bool) Decision {
	start := time.Now()
	var d Decision
	if consume {
		d = h.limiter.Allow(r.Context(), cred.ID, p.rate)
	} else {
		d = h.limiter.Peek(r.Context(), cred.ID, p.rate)
	}
	h.metrics.observe(d, time.Since(start))
	return d
}

// book books the request and advertises the headroom left, reporting
// whether the request was admitted.
func (h *Handler) book(w http.ResponseWriter, r *http.Request, cred *credential.Credential, p *policy) bool {
	d := h.decide(r, cred, p, true)
	advertise(w.Header(), p, d)
	if !d.Allowed {
		retry := max(ceilSeconds(d.RetryAfter), 1)
		w.Header().Set("Retry-After", strconv.FormatInt(retry, 10))
	}
	return d.Allowed
}

// refuse answers 429 with the contract's body; book set Retry-After.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, p *policy) error {
	retry, _ := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
	return apierror.Refuse(w, r, apierror.New(http.StatusTooManyRequests, "rate_limited", refusal(p.rate, retry)).
		WithHeader("Retry-After", strconv.FormatInt(retry, 10)))
}

// advertise sets the RateLimit headers for decision d.
func advertise(hdr http.Header, p *policy, d Decision) {
	hdr[headerPolicy] = []string{p.header}
	var buf [64]byte
	v := append(buf[:0], policyName+";r="...)
	v = strconv.AppendInt(v, d.Remaining, 10)
	v = append(v, ";t="...)
	v = strconv.AppendInt(v, ceilSeconds(d.Reset), 10)
	hdr[headerRateLimit] = []string{string(v)}
}

// bookOnAnswer holds a conditional read's booking until its answer's
// status is known: a 304 is not booked and carries the headroom peeked
// before; any other answer is booked then, and if the credential ran out
// of headroom meanwhile, the answer becomes the 429 it would have been.
type bookOnAnswer struct {
	*caddyhttp.ResponseWriterWrapper
	h        *Handler
	r        *http.Request
	cred     *credential.Credential
	p        *policy
	peeked   Decision
	answered bool // WriteHeader was called
	refused  bool // the answer was replaced by a 429; drop its body
}

func (b *bookOnAnswer) WriteHeader(status int) {
	if b.answered {
		return
	}
	b.answered = true
	if status == http.StatusNotModified {
		advertise(b.Header(), b.p, b.peeked)
		b.ResponseWriter.WriteHeader(status)
		return
	}
	if b.h.book(b.ResponseWriter, b.r, b.cred, b.p) {
		b.ResponseWriter.WriteHeader(status)
		return
	}
	b.refused = true
	hdr := b.Header()
	for _, k := range []string{"Etag", "Content-Length", "Content-Type"} {
		delete(hdr, k)
	}
	b.h.refuseDirect(b.ResponseWriter, b.r, b.p)
}

func (b *bookOnAnswer) Write(p []byte) (int, error) {
	if !b.answered {
		b.WriteHeader(http.StatusOK)
	}
	if b.refused {
		return len(p), nil
	}
	return b.ResponseWriter.Write(p)
}

// refuseDirect writes the 429 body itself: the answer under way can no
// longer go to Caddy's error routes.
func (h *Handler) refuseDirect(w http.ResponseWriter, r *http.Request, p *policy) {
	retry, _ := strconv.ParseInt(w.Header().Get("Retry-After"), 10, 64)
	apierror.Write(w, r, apierror.New(http.StatusTooManyRequests, "rate_limited", refusal(p.rate, retry)).
		WithHeader("Retry-After", strconv.FormatInt(retry, 10)))
}

// ceilSeconds rounds up, so a client that waits as told is never early.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

func refusal(rate Rate, retry int64) string {
	per := map[time.Duration]string{time.Second: "second", time.Minute: "minute", time.Hour: "hour"}[rate.Window]
	if per == "" {
		per = rate.Window.String()
	}
	wait := "1 second"
	if retry != 1 {
		wait = strconv.FormatInt(retry, 10) + " seconds"
	}
	return fmt.Sprintf("This credential has made more requests than its limit of %d per %s allows; retry after %s.",
		rate.Limit, per, wait)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
