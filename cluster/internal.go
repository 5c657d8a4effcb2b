package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The instances reach each other on an internal listener of their own,
// never the public site: the address a member advertises is this
// listener's, and it serves nothing but the requests other instances
// forward (the API answers anything else there 404). The operator keeps
// it off the public network: on a private network, or over TLS where
// both sides prove themselves with a certificate of the cluster's own
// authority (InternalTLS), or both.

// InternalTLS are the files of the internal listener's TLS: the PEM
// bundle of the authority every instance's certificate is signed by, and
// this instance's certificate and key, which it presents as a server to
// the instances that forward to it and as a client to those it forwards
// to (so it needs both the serverAuth and clientAuth key usages).
type InternalTLS struct {
	CA   string `json:"ca,omitempty"`
	Cert string `json:"cert,omitempty"`
	Key  string `json:"key,omitempty"`
	// ServerName is the name the others' certificates are checked for.
	// Default: the host of the address they advertise.
	ServerName string `json:"server_name,omitempty"`
}

// Set reports whether any file is named.
func (t InternalTLS) Set() bool { return t.CA != "" || t.Cert != "" || t.Key != "" }

// Configs reads the files into the listener's TLS, which asks every
// client for a certificate of the authority, and the forwarding client's,
// which presents this instance's and trusts only the authority.
func (t InternalTLS) Configs() (server, client *tls.Config, err error) {
	if t.CA == "" || t.Cert == "" || t.Key == "" {
		return nil, nil, errors.New("internal_tls needs ca, cert and key")
	}
	pem, err := os.ReadFile(t.CA)
	if err != nil {
		return nil, nil, fmt.Errorf("internal_tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("internal_tls ca %s holds no PEM certificate", t.CA)
	}
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("internal_tls cert and key: %w", err)
	}
	server = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
	client = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ServerName:   t.ServerName,
	}
	return server, client, nil
}

// Internal is the internal listener's server.
type Internal struct {
	srv  *http.Server
	done chan struct{}
}

// ServeInternal serves h on ln, over TLS when cfg is set, until Close.
// h is the API's answer to forwarded requests.
func ServeInternal(ln net.Listener, cfg *tls.Config, h http.Handler, logger *zap.Logger) *Internal {
	if logger == nil {
		logger = zap.NewNop()
	}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	// A refused handshake (a client without the authority's certificate)
	// is worth an operator's look.
	errorLog, _ := zap.NewStdLogAt(logger, zapcore.WarnLevel)
	s := &Internal{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			// Longer than the forwarding client keeps a connection idle,
			// so that the server never closes one it is about to use.
			IdleTimeout: 2 * time.Minute,
			ErrorLog:    errorLog,
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("internal listener stopped", zap.Error(err))
		}
	}()
	return s
}

// Close stops taking forwarded requests and waits, until ctx ends, for
// those being answered.
func (s *Internal) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	return err
}
