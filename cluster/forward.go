package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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
// answers it at forwardPrefix, outside the routes that do those, and
// takes the caller's credential from the request as this instance signed
// it. The signature is an HMAC under a key derived from the secrets key
// every instance shares, over the request and a time, so nobody else can
// make a request that skips the rate limit.
const (
	forwardPrefix   = "/_practicegw/forwarded"
	headerForwarded = "Practicegw-Forwarded"
	// forwardSkew bounds how old a forwarded request may be, and how far
	// the instances' clocks may disagree.
	forwardSkew = time.Minute
	// forwardMaxBody is the most of a request body forwarded: more than
	// the API takes, which the holder then refuses as it would.
	forwardMaxBody = 2 << 20
)

// forwardStats count what the cluster did with requests, for /metrics;
// process-wide, so a reload keeps counting.
var forwardStats struct {
	forwarded, failed atomic.Uint64
}

// ErrHolderGone says that the holder a write was sent to went away while
// answering it: it may have taken the write, so it is not answered here
// again; the caller retries it (with its Idempotency-Key).
var ErrHolderGone = errors.New("the instance holding the firm went away while answering")

// forwardClient reaches the other instances; its connections are kept
// and reused, so a forwarded read costs one round trip on the network.
var forwardClient = &http.Client{
	Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	},
	// Redirects are the holder's answer, passed on as it gave them.
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
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
	resp, err := forwardClient.Do(out)
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
// forwardPrefix, with the caller's credential signed by this instance
// and without the bearer token.
func (cl *Cluster) forwardRequest(r *http.Request, base string, cred *credential.Credential, body []byte) (*http.Request, error) {
	credJSON, err := json.Marshal(cred)
	if err != nil {
		return nil, err
	}
	uri := r.URL.RequestURI()
	at := strconv.FormatInt(time.Now().UnixMilli(), 10)
	c := base64.RawURLEncoding.EncodeToString(credJSON)
	sig := cl.signForward(r.Method, uri, at, c, body)
	out, err := http.NewRequestWithContext(r.Context(), r.Method, strings.TrimRight(base, "/")+forwardPrefix+uri, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for name, vals := range r.Header {
		if hopHeader(name) || name == "Authorization" {
			continue
		}
		out.Header[name] = vals
	}
	out.Header.Set(headerForwarded, at+"."+c+"."+sig)
	return out, nil
}

// Forwarded reads a request another instance forwarded: the request as
// the caller sent it (at its own path) and the credential the other
// instance authenticated. A request without a valid signature is refused.
func (cl *Cluster) Forwarded(r *http.Request) (*http.Request, *credential.Credential, error) {
	if cl == nil || cl.key == nil {
		return nil, nil, errors.New("this instance takes no forwarded requests: it has no read_model bound")
	}
	at, c, sig, ok := splitForwarded(r.Header.Get(headerForwarded))
	if !ok {
		return nil, nil, errors.New("the forwarded request is not signed")
	}
	ms, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return nil, nil, errors.New("the forwarded request's time is unreadable")
	}
	if d := time.Since(time.UnixMilli(ms)); d > forwardSkew || d < -forwardSkew {
		return nil, nil, errors.New("the forwarded request is too old")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, forwardMaxBody))
	if err != nil {
		return nil, nil, err
	}
	uri := strings.TrimPrefix(r.URL.RequestURI(), forwardPrefix)
	if !hmac.Equal([]byte(sig), []byte(cl.signForward(r.Method, uri, at, c, body))) {
		return nil, nil, errors.New("the forwarded request's signature does not match")
	}
	credJSON, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, nil, err
	}
	var cred credential.Credential
	if err := json.Unmarshal(credJSON, &cred); err != nil {
		return nil, nil, fmt.Errorf("the forwarded credential: %w", err)
	}
	in := r.Clone(r.Context())
	in.URL.Path = strings.TrimPrefix(r.URL.Path, forwardPrefix)
	in.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, forwardPrefix)
	in.RequestURI = uri
	in.Body = io.NopCloser(bytes.NewReader(body))
	in.Header.Del(headerForwarded)
	return in, &cred, nil
}

// signForward is the HMAC of a forwarded request: its method, URI (as the
// caller sent it), time, credential and body.
func (cl *Cluster) signForward(method, uri, at, cred string, body []byte) string {
	digest := sha256.Sum256(body)
	mac := hmac.New(sha256.New, cl.key)
	for _, part := range []string{method, uri, at, cred} {
		mac.Write([]byte(part))
		mac.Write([]byte{'\n'})
	}
	mac.Write(digest[:])
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func splitForwarded(v string) (at, cred, sig string, ok bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
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
