package redis

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// TLSFiles are the files a rediss:// connection is made with, for a Redis
// whose certificate a private authority signs or that asks clients for a
// certificate of their own (tls-auth-clients). Every Redis client is made
// here with them, so that no use of Redis (stores, budgets, deliveries, the
// rate limiter, a dispatcher) can be left on other terms. They are the
// practicegw app's redis_tls setting, which PRACTICEGW_REDIS_TLS_CA,
// _CERT and _KEY fill when the configuration leaves it out.
type TLSFiles struct {
	// CA is a PEM bundle of the authorities that sign the server's
	// certificate. Empty: the system's.
	CA string `json:"ca,omitempty"`
	// Cert and Key are a client certificate and its key, in PEM. Empty:
	// none.
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
}

// The variables the files usually come from, which errors name.
const (
	tlsCAVar   = "PRACTICEGW_REDIS_TLS_CA"
	tlsCertVar = "PRACTICEGW_REDIS_TLS_CERT"
	tlsKeyVar  = "PRACTICEGW_REDIS_TLS_KEY"
)

// Client is a Redis client as NewClient makes it: named here so that what
// holds one (the gateway, across reloads; the rate limiter) imports no
// Redis package of its own, and talks to Redis through this package.
type Client = goredis.Client

// NewClient connects to the Redis at url (redis://host:port/db, or
// rediss:// for TLS, with files). ioTimeout bounds each read and write on
// a connection, so that a Redis that stops answering fails calls instead
// of holding them: the gateway, whose requests wait on Redis, uses a short
// one; a dispatcher, whose scripts move batches, a longer one. The caller
// closes the client.
func NewClient(url string, files TLSFiles, ioTimeout time.Duration) (*goredis.Client, error) {
	opts, err := ClientOptions(url, files)
	if err != nil {
		return nil, err
	}
	opts.DialTimeout = max(time.Second, ioTimeout)
	opts.ReadTimeout = ioTimeout
	opts.WriteTimeout = ioTimeout
	return goredis.NewClient(opts), nil
}

// NewDeadlineClient connects to the Redis at url as NewClient does, for
// calls whose caller's deadline is the only budget (the rate limiter
// answers within a request's): no retries, no dial back-off, no
// client-side wait that could outlast the deadline; a connection from the
// pool is waited for at most poolTimeout.
func NewDeadlineClient(url string, files TLSFiles, poolTimeout time.Duration) (*Client, error) {
	opt, err := ClientOptions(url, files)
	if err != nil {
		return nil, err
	}
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.PoolTimeout = poolTimeout
	return goredis.NewClient(opt), nil
}

// ClientOptions are NewClient's options before its timeouts, for a client
// that needs others.
func ClientOptions(url string, files TLSFiles) (*goredis.Options, error) {
	return clientOptions(url, files)
}

func clientOptions(rawURL string, files TLSFiles) (*goredis.Options, error) {
	shown := rawURL
	if u, err := url.Parse(rawURL); err == nil {
		shown = u.Redacted() // the URL may carry a password
	}
	opts, err := goredis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis %s: %w", shown, err)
	}
	ca, cert, key := files.CA, files.Cert, files.Key
	if ca == "" && cert == "" && key == "" {
		return opts, nil
	}
	if opts.TLSConfig == nil {
		return nil, fmt.Errorf("redis %s: %s, %s or %s is set, which needs a rediss:// URL", shown, tlsCAVar, tlsCertVar, tlsKeyVar)
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tlsCAVar, err)
		}
		opts.TLSConfig.RootCAs = x509.NewCertPool()
		if !opts.TLSConfig.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", tlsCAVar, ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, errors.New(tlsCertVar + " and " + tlsKeyVar + " go together: set both or neither")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("redis client certificate (%s, %s): %w", tlsCertVar, tlsKeyVar, err)
		}
		opts.TLSConfig.Certificates = []tls.Certificate{pair}
	}
	return opts, nil
}
