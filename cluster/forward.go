package cluster

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/credential"
)

// A request for a firm this instance does not hold is sent on to an
// instance that does, after this one has authenticated it, charged it to
// the caller's rate limit and written its access log line: the holder
// answers it at forwardPrefix on its internal listener (never the public
// site), outside the routes that do those, and takes the caller's
// credential from the request as this instance signed it.
//
// What the holder takes is only what was signed: the method, the URI,
// the body, the headers it acts on (forwardedHeaders: the rest are not
// sent, and dropped if they come), the credential, a time within
// forwardSkew of the holder's clock, and a nonce the holder claims in the
// store every instance shares, so that a captured request is taken once,
// by one instance, and never again. The signature is an HMAC under a key
// derived from the secrets key every instance shares, so nobody else can
// make a request that skips the rate limit.
const (
	forwardPrefix   = "/_practicegw/forwarded"
	headerForwarded = "Practicegw-Forwarded"
	// forwardVersion names the signed form; a request of another is
	// refused.
	forwardVersion = "v2"
	// forwardSkew bounds how far a forwarded request's time may be from
	// the holder's clock, either way: how long it takes to arrive, and
	// how far the instances' clocks may disagree (NTP keeps them within
	// milliseconds).
	forwardSkew = 5 * time.Second
	// nonceTTL is how long a nonce is remembered: as long as a request
	// stamped at the edge of the window stays in it.
	nonceTTL = 2*forwardSkew + time.Second
	// forwardMaxBody is the most of a request body forwarded: more than
	// the API takes, which the holder then refuses as it would.
	forwardMaxBody = 2 << 20
)

// forwardedHeaders are the request headers the holder acts on, in the
// order they are signed: the only ones sent on. An absent header is
// signed as absent, so that one added on the way is refused too.
var forwardedHeaders = []string{"Accept", "Content-Type", "Idempotency-Key", "If-Match", "If-None-Match"}

// Nonces remembers the nonces of the forwarded requests taken, in the
// store every instance shares, for as long as a request may be taken.
type Nonces interface {
	// ClaimNonce takes nonce until ttl passes, reporting false if any
	// instance took it before.
	ClaimNonce(ctx context.Context, nonce string, ttl time.Duration) (bool, error)
}

// Why a forwarded request is refused. The API answers each with the
// contract's error; none says more than this of the request, and none
// carries the header.
var (
	// ErrNotForwarded: the request bears no signature of the current
	// form, or one that cannot be read.
	ErrNotForwarded = errors.New("not signed by an instance")
	// ErrForged: the signature does not match what arrived (a header,
	// the body, the URI or the credential changed on the way, or another
	// key signed it).
	ErrForged = errors.New("its signature does not match the request")
	// ErrStale: its time is outside forwardSkew of this instance's clock.
	ErrStale = errors.New("its time is outside the window")
	// ErrReplayed: an instance took its nonce before.
	ErrReplayed = errors.New("it was taken before")
	// ErrNoNonces: the store that remembers nonces could not be asked;
	// the request is refused rather than risk taking it twice.
	ErrNoNonces = errors.New("the nonces cannot be checked")
	// ErrCredential: the caller's credential does not stand here: it was
	// revoked, or the registry has not read the revocations yet (the
	// registry's error is wrapped).
	ErrCredential = errors.New("the credential does not stand")
	// ErrNotClustered: this instance takes no forwarded requests.
	ErrNotClustered = errors.New("this instance takes no forwarded requests: it shares no firms")
)

// forwardStats count what the cluster did with requests, for /metrics;
// process-wide, so a reload keeps counting.
var forwardStats struct {
	forwarded, failed atomic.Uint64
	refused           [len(refusalReasons)]atomic.Uint64
}

// refusalReasons name the refusals in the metrics, in the order of
// reasonOf.
var refusalReasons = [...]string{"not_signed", "forged", "stale", "replayed", "nonces_unavailable", "credential", "other"}

func reasonOf(err error) int {
	for i, e := range []error{ErrNotForwarded, ErrForged, ErrStale, ErrReplayed, ErrNoNonces, ErrCredential} {
		if errors.Is(err, e) {
			return i
		}
	}
	return len(refusalReasons) - 1
}

// Reason names why a forwarded request was refused, in a word, for logs.
func Reason(err error) string { return refusalReasons[reasonOf(err)] }

// ErrHolderGone says that the holder a write was sent to went away while
// answering it: it may have taken the write, so it is not answered here
// again; the caller retries it (with its Idempotency-Key).
var ErrHolderGone = errors.New("the instance holding the firm went away while answering")

// newForwardClient reaches the other instances' internal listeners, over
// TLS when cfg is set; its connections are kept and reused, so a
// forwarded read costs one round trip on the network.
func newForwardClient(cfg *tls.Config) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:     cfg,
			TLSHandshakeTimeout: 2 * time.Second,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
			// The answer's bytes are passed on as the holder wrote them.
			DisableCompression: true,
		},
		// Redirects are the holder's answer, passed on as it gave them.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Forward answers a request for kind k of the caller's firm through an
// instance that holds the firm, when this one does not; false when this
// instance is to answer it. A holder that cannot be reached is forgotten
// until the membership is read again, and this instance answers (from
// the store), but for a write that may have reached it: ErrHolderGone,
// for the caller to answer.
func (c *Cluster) Forward(w http.ResponseWriter, r *http.Request, cred *credential.Credential, k practice.Kind) (bool, error) {
	if cred == nil || cred.Sandbox || !c.firms.FromModel(cred.Firm, k) {
		return false, nil
	}
	target, local, found := c.target(cred.Firm)
	if local || !found {
		return false, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, forwardMaxBody))
	if err != nil {
		return false, nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	out, err := c.forwardRequest(r, target.Advertise, cred, body)
	if err != nil {
		return false, nil
	}
	resp, err := c.client.Do(out)
	if err != nil {
		forwardStats.failed.Add(1)
		c.forget(target.ID)
		c.logger.Warn("holder not reached; answering here", zap.String("firm", cred.Firm), zap.String("holder", target.Advertise), zap.Error(err))
		if r.Method != http.MethodGet && !isDialError(err) {
			// The holder may have taken the write: answering it again
			// here could make it twice.
			return false, ErrHolderGone
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		return false, nil
	}
	defer resp.Body.Close()
	forwardStats.forwarded.Add(1)
	h := w.Header()
	requestID := h.Values("Request-Id")
	for name, vals := range resp.Header {
		if hopHeader(name) {
			continue
		}
		h[name] = vals
	}
	if len(requestID) > 0 {
		h["Request-Id"] = requestID
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	return true, nil
}

// forwardRequest is r as the holder at base receives it: at
// forwardPrefix, with the headers the holder acts on and nothing else
// (no bearer token), the caller's credential, a time and a nonce, all
// signed by this instance.
func (c *Cluster) forwardRequest(r *http.Request, base string, cred *credential.Credential, body []byte) (*http.Request, error) {
	credJSON, err := json.Marshal(cred)
	if err != nil {
		return nil, err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	s := signed{
		method: r.Method, uri: r.URL.RequestURI(),
		at:     strconv.FormatInt(c.now().UnixMilli(), 10),
		nonce:  base64.RawURLEncoding.EncodeToString(raw[:]),
		cred:   base64.RawURLEncoding.EncodeToString(credJSON),
		header: r.Header, body: body,
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, strings.TrimRight(base, "/")+forwardPrefix+s.uri, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for _, name := range forwardedHeaders {
		if vals := r.Header.Values(name); len(vals) > 0 {
			out.Header[name] = vals
		}
	}
	out.Header.Set(headerForwarded, strings.Join([]string{forwardVersion, s.at, s.nonce, s.cred, s.sign(c.key)}, "."))
	return out, nil
}

// Forwarded reads a request another instance forwarded: the request as
// the caller sent it (at its own path, with only the headers signed) and
// the caller's credential as this instance's registry knows it now. A
// request that is not signed as it arrived, is outside the window, whose
// nonce an instance took before, or whose credential no longer stands
// (revoked, on any instance, as practicegw_auth would find it) is
// refused with the error that says why, counted and logged without a
// word of the header. Whether the credential still holds the route's
// scope is the API's to judge, on the credential returned.
func (c *Cluster) Forwarded(r *http.Request) (*http.Request, *credential.Credential, error) {
	in, cred, err := c.forwarded(r)
	if err != nil {
		forwardStats.refused[reasonOf(err)].Add(1)
		fields := []zap.Field{zap.String("reason", Reason(err)), zap.String("method", r.Method),
			zap.String("path", r.URL.Path), zap.String("from", r.RemoteAddr), zap.Error(err)}
		if cred != nil {
			fields = append(fields, zap.String("credential", cred.ID), zap.String("firm", cred.Firm))
		}
		if c != nil {
			c.logger.Warn("forwarded request refused", fields...)
		}
		return nil, nil, err
	}
	return in, cred, nil
}

// forwarded is Forwarded without the counting and logging; on a refusal
// it returns the credential signed, when the signature was good.
func (c *Cluster) forwarded(r *http.Request) (*http.Request, *credential.Credential, error) {
	if c == nil || c.key == nil {
		return nil, nil, ErrNotClustered
	}
	s, sig, err := parseForwarded(r.Header.Get(headerForwarded))
	if err != nil {
		return nil, nil, err
	}
	ms, _ := strconv.ParseInt(s.at, 10, 64)
	if d := c.now().Sub(time.UnixMilli(ms)); d > forwardSkew || d < -forwardSkew {
		return nil, nil, fmt.Errorf("%w: %s from this instance's clock", ErrStale, d.Round(time.Millisecond))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, forwardMaxBody))
	if err != nil {
		return nil, nil, err
	}
	s.method, s.uri, s.header, s.body = r.Method, strings.TrimPrefix(r.URL.RequestURI(), forwardPrefix), r.Header, body
	if !strings.HasPrefix(r.URL.Path, forwardPrefix+"/") || !hmac.Equal([]byte(sig), []byte(s.sign(c.key))) {
		return nil, nil, ErrForged
	}
	credJSON, err := base64.RawURLEncoding.DecodeString(s.cred)
	if err != nil {
		return nil, nil, ErrForged
	}
	var signed credential.Credential
	if err := json.Unmarshal(credJSON, &signed); err != nil {
		return nil, nil, fmt.Errorf("%w: the credential: %v", ErrForged, err)
	}
	if err := c.claim(r.Context(), s.nonce); err != nil {
		return nil, &signed, err
	}
	cred, err := c.stands(&signed)
	if err != nil {
		return nil, &signed, err
	}
	in := r.Clone(r.Context())
	in.URL.Path = strings.TrimPrefix(r.URL.Path, forwardPrefix)
	in.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, forwardPrefix)
	in.RequestURI = s.uri
	in.Body = io.NopCloser(bytes.NewReader(body))
	in.ContentLength = int64(len(body))
	in.Header = http.Header{}
	for _, name := range forwardedHeaders {
		if vals := r.Header.Values(name); len(vals) > 0 {
			in.Header[name] = vals
		}
	}
	return in, cred, nil
}

// claim takes a forwarded request's nonce in the store every instance
// shares: a nonce taken before is a replay.
func (c *Cluster) claim(ctx context.Context, nonce string) error {
	if c.nonces == nil {
		return ErrNoNonces
	}
	fresh, err := c.nonces.ClaimNonce(ctx, nonce, nonceTTL)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrNoNonces, err)
	case !fresh:
		return ErrReplayed
	}
	return nil
}

// stands is the signed credential as this instance's registry knows it
// now; the signing instance may not have heard of a revocation yet.
func (c *Cluster) stands(signed *credential.Credential) (*credential.Credential, error) {
	if c.credentials == nil {
		return nil, fmt.Errorf("%w: this instance has no registry", ErrCredential)
	}
	cur, err := c.credentials.Standing(signed)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCredential, err)
	}
	if cur.ID != signed.ID || cur.Firm != signed.Firm || cur.Sandbox != signed.Sandbox {
		return nil, fmt.Errorf("%w: the registry knows %s otherwise", ErrCredential, signed.ID)
	}
	return cur, nil
}

// signed is what a forwarded request's signature covers.
type signed struct {
	method, uri, at, nonce, cred string
	header                       http.Header
	body                         []byte
}

// sign is the HMAC of s under key: each part written with its length, so
// that no two requests sign alike, then the headers the holder acts on
// (an absent one as none) and the body's digest.
func (s signed) sign(key []byte) string {
	mac := hmac.New(sha256.New, key)
	for _, part := range []string{"practicegw forwarded " + forwardVersion, s.method, s.uri, s.at, s.nonce, s.cred} {
		writePart(mac, part)
	}
	for _, name := range forwardedHeaders {
		vals := s.header.Values(name)
		writePart(mac, name)
		_ = binary.Write(mac, binary.BigEndian, uint32(len(vals)))
		for _, v := range vals {
			writePart(mac, v)
		}
	}
	digest := sha256.Sum256(s.body)
	mac.Write(digest[:])
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func writePart(h hash.Hash, part string) {
	_ = binary.Write(h, binary.BigEndian, uint32(len(part)))
	h.Write([]byte(part))
}

// parseForwarded splits the header into what it says and its signature:
// version, time, nonce, credential, signature.
func parseForwarded(v string) (signed, string, error) {
	parts := strings.Split(v, ".")
	if len(parts) != 5 || parts[0] != forwardVersion || parts[2] == "" || parts[3] == "" || parts[4] == "" {
		return signed{}, "", ErrNotForwarded
	}
	if _, err := strconv.ParseInt(parts[1], 10, 64); err != nil {
		return signed{}, "", ErrNotForwarded
	}
	return signed{at: parts[1], nonce: parts[2], cred: parts[3]}, parts[4], nil
}

// hopHeader reports the headers that belong to one connection, not to
// the request or answer passed on.
func hopHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length":
		return true
	}
	return false
}

// isDialError reports whether the holder was never reached, so that a
// write sent to it cannot have been taken.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
