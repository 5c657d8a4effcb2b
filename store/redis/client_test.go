package redis

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/practicegw/practicegw/internal/redistest"
)

// A rediss:// URL reaches a Redis that serves TLS alone, with a
// certificate from a private authority, and wants a client certificate:
// with the three variables, and with none of them missing.
func TestClientOverTLS(t *testing.T) {
	srv := redistest.Start(t, redistest.WithTLS())
	files := srv.TLS()
	all := map[string]string{tlsCAVar: files.CA, tlsCertVar: files.ClientCert, tlsKeyVar: files.ClientKey}

	ping := func(env map[string]string) error {
		t.Helper()
		opts, err := clientOptions(srv.URL(), TLSFiles{CA: env[tlsCAVar], Cert: env[tlsCertVar], Key: env[tlsKeyVar]})
		if err != nil {
			t.Fatal(err)
		}
		opts.MaxRetries = -1
		rdb := goredis.NewClient(opts)
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return rdb.Ping(ctx).Err()
	}
	if err := ping(all); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}

	noCA := map[string]string{tlsCertVar: files.ClientCert, tlsKeyVar: files.ClientKey}
	var unknown x509.UnknownAuthorityError
	if err := ping(noCA); !errors.As(err, &unknown) {
		t.Errorf("without %s: %v, want the server's certificate refused", tlsCAVar, err)
	}
	if err := ping(map[string]string{tlsCAVar: files.CA}); err == nil {
		t.Errorf("without a client certificate the server answered")
	}

	rdb, err := NewClient(srv.URL(), TLSFiles{CA: files.CA, Cert: files.ClientCert, Key: files.ClientKey}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("NewClient does not use the files: %v", err)
	}
}

func TestClientOptionsRefuse(t *testing.T) {
	srv := redistest.Start(t, redistest.WithTLS())
	files := srv.TLS()
	for _, c := range []struct {
		url  string
		env  map[string]string
		want string
	}{
		{"redis://:s3cret@127.0.0.1:6379/0", map[string]string{tlsCAVar: files.CA}, "needs a rediss:// URL"},
		{srv.URL(), map[string]string{tlsCAVar: "/nonexistent/ca.pem"}, tlsCAVar},
		{srv.URL(), map[string]string{tlsCAVar: files.ClientKey}, "holds no PEM certificate"},
		{srv.URL(), map[string]string{tlsCertVar: files.ClientCert}, "go together"},
		{srv.URL(), map[string]string{tlsCertVar: files.ClientCert, tlsKeyVar: files.CA}, "redis client certificate"},
		{"rediss://:s3cret@127.0.0.1:6379/0?nonsense=1", nil, "unexpected option"},
	} {
		_, err := clientOptions(c.url, TLSFiles{CA: c.env[tlsCAVar], Cert: c.env[tlsCertVar], Key: c.env[tlsKeyVar]})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with %v: %v, want an error saying %q", c.url, c.env, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows the URL's password: %v", err)
		}
	}
}
