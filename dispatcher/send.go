package dispatcher

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// userAgent identifies webhook requests to receivers and their firewalls.
const userAgent = "practicegw-webhooks/1"

// DeliveryError says why an attempt was not accepted, in a sentence fit for
// the delivery log (it never contains a secret), and whether retrying can
// help.
type DeliveryError struct {
	Message string
	// Code is the response status, or 0 if no response arrived.
	Code int
	// Retriable is false when the schedule should stop: the endpoint asked
	// to stop (410) or the URL can never be delivered to.
	Retriable bool
	// Unhealthy means the endpoint looks down or overloaded (no answer, a
	// 5xx, a 429), which is what trips its circuit breaker. A 4xx comes from
	// a live endpoint and does not.
	Unhealthy bool
}

func (e *DeliveryError) Error() string { return e.Message }

// Gone reports whether the endpoint answered 410 Gone.
func (e *DeliveryError) Gone() bool { return e.Code == http.StatusGone }

// sender makes one HTTP request per attempt.
type sender struct {
	client  *http.Client
	timeout time.Duration
}

func newSender(policy *AddressPolicy, timeout time.Duration, perHost int) *sender {
	dialer := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: policy.Control}
	transport := &http.Transport{
		// No proxy: a proxy would be dialled instead of the endpoint and the
		// address check would vet the proxy, not the destination.
		Proxy:               nil,
		DialContext:         dialer.DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: perHost,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
	}
	return &sender{
		client: &http.Client{
			Transport: transport,
			// A redirect is a failed attempt: following it would post signed
			// events to a URL nobody registered.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		timeout: timeout,
	}
}

func (s *sender) close() { s.client.CloseIdleConnections() }

// response is what came back from one request. err is nil when the
// endpoint accepted the event (any 2xx).
type response struct {
	code       int
	excerpt    string
	retryAfter time.Duration // 0 if the receiver gave none
	err        *DeliveryError
}

// post sends body to rawURL. now is the injected clock's time, for reading
// a Retry-After date.
func (s *sender) post(ctx context.Context, rawURL string, header http.Header, body []byte, now time.Time) response {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return response{err: &DeliveryError{Message: "the endpoint URL cannot be requested: " + unwrapURLError(err).Error()}}
	}
	req.Header = header
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)

	resp, err := s.client.Do(req)
	if err != nil {
		return response{err: s.describe(err)}
	}
	defer resp.Body.Close()
	r := response{code: resp.StatusCode, excerpt: readExcerpt(resp.Body)}
	// Drain a little more so the connection can be reused; a receiver that
	// streams megabytes back does not get to hold us.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))

	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		return r
	case code == http.StatusGone:
		r.err = &DeliveryError{Code: code, Message: "the endpoint answered 410 Gone, so it has been disabled"}
	case code >= 300 && code <= 399:
		msg := fmt.Sprintf("the endpoint answered %s; redirects are not followed, so register the final URL", statusText(code))
		if loc := resp.Header.Get("Location"); loc != "" {
			msg = fmt.Sprintf("the endpoint answered %s redirecting to %s; redirects are not followed, so register the final URL",
				statusText(code), truncate(loc, 200))
		}
		r.err = &DeliveryError{Code: code, Retriable: true, Message: msg}
	default:
		r.err = &DeliveryError{Code: code, Retriable: true,
			Unhealthy: code >= 500 || code == http.StatusTooManyRequests,
			Message:   fmt.Sprintf("the endpoint answered %s", statusText(code))}
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			r.retryAfter, _ = retryAfter(resp.Header.Get("Retry-After"), now)
		}
	}
	return r
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("%d %s", code, t)
	}
	return fmt.Sprintf("%d", code)
}

// describe turns a transport error into a log sentence.
func (s *sender) describe(err error) *DeliveryError {
	retriable := func(msg string) *DeliveryError {
		return &DeliveryError{Message: msg, Retriable: true, Unhealthy: true}
	}
	var (
		blocked  *BlockedAddressError
		dnsErr   *net.DNSError
		hostErr  x509.HostnameError
		authErr  x509.UnknownAuthorityError
		certErr  x509.CertificateInvalidError
		verifErr *tls.CertificateVerificationError
		recErr   tls.RecordHeaderError
		netErr   net.Error
	)
	switch {
	case errors.As(err, &blocked):
		// The host now resolves somewhere it must not; retrying would only
		// knock on the same door.
		return &DeliveryError{Message: blocked.Error()}
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return retriable(fmt.Sprintf("no response within %s", s.timeout))
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return retriable(fmt.Sprintf("the host %s does not resolve", dnsErr.Name))
		}
		return retriable(fmt.Sprintf("could not resolve the host %s", dnsErr.Name))
	case errors.Is(err, syscall.ECONNREFUSED):
		return retriable("the connection was refused")
	case errors.Is(err, syscall.ECONNRESET):
		return retriable("the connection was reset by the endpoint")
	case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
		return retriable("the endpoint's network is unreachable")
	case errors.As(err, &hostErr):
		return retriable("the TLS certificate is not valid for this host: " + hostErr.Error())
	case errors.As(err, &authErr), errors.As(err, &certErr), errors.As(err, &verifErr):
		return retriable("the TLS certificate is not trusted: " + unwrapURLError(err).Error())
	case errors.As(err, &recErr):
		return retriable("the endpoint did not answer with TLS; check whether the URL should be http")
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return retriable("the endpoint closed the connection without answering")
	}
	return retriable("the request failed: " + unwrapURLError(err).Error())
}

// unwrapURLError drops url.Error's "Post \"https://...\":" preamble; the
// URL is on the endpoint already.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// readExcerpt keeps the start of a body as valid UTF-8 of at most
// maxExcerpt bytes, so the log can show what the receiver said without
// storing whatever it sent.
func readExcerpt(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, maxExcerpt))
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	for len(s) > maxExcerpt {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
