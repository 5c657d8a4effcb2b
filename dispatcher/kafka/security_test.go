package kafka_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/practicegw/practicegw/dispatcher/kafka"
)

// A dispatcher reaches brokers that require TLS and SASL, with each mechanism a managed Kafka offers, and a
// client without the right credentials is refused.
func TestSecuredBrokers(t *testing.T) {
	caFile, serverTLS := testCertificates(t)
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			sec, err := kafka.SecurityConfig{CAFile: caFile, SASLMechanism: mech, Username: "practicegw", Password: "correct horse "}.Build()
			if err != nil {
				t.Fatal(err)
			}
			e := newSecuredEnv(t, sec, []kfake.Opt{
				kfake.EnableSASL(), kfake.Superuser(mech, "practicegw", "correct horse "), kfake.TLS(serverTLS),
			})
			rc := newReceiver(t, nil)
			rc.register(e)
			e.dispatcher(e.config())
			c := change("Lockwood & Vane LLP")
			e.publish(c)
			rc.waitAll([]string{eventID(c)}, 30*time.Second)

			refused := map[string]kafka.SecurityConfig{
				"wrong password": {CAFile: caFile, SASLMechanism: mech, Username: "practicegw", Password: "wrong"},
				"no sasl":        {CAFile: caFile},
			}
			for name, sc := range refused {
				sec, err := sc.Build()
				if err != nil {
					t.Fatal(err)
				}
				pub := kafka.NewPublisher(kafka.PublisherConfig{Brokers: e.brokers, Security: sec, Topic: topics.Changes})
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err = pub.Publish(ctx, change("Refused Ltd"))
				cancel()
				pub.Close()
				if err == nil {
					t.Errorf("%s: the broker accepted a change", name)
				}
			}
		})
	}
}

func TestSecurityConfigRefusesWhatCannotWork(t *testing.T) {
	for name, sc := range map[string]kafka.SecurityConfig{
		"unknown mechanism":    {SASLMechanism: "GSSAPI", Username: "u", Password: "p"},
		"mechanism, no user":   {SASLMechanism: "PLAIN"},
		"user, no mechanism":   {Username: "u", Password: "p"},
		"certificate, no key":  {CertFile: "/etc/client.pem"},
		"missing CA bundle":    {CAFile: filepath.Join(t.TempDir(), "absent.pem")},
		"CA bundle is not PEM": {CAFile: writeFile(t, "ca.pem", "not a certificate")},
	} {
		if _, err := sc.Build(); err == nil {
			t.Errorf("%s: built", name)
		}
	}
}

// testCertificates makes a CA, writes its certificate to a file, and
// returns that file and a server configuration for 127.0.0.1 signed by it.
func testCertificates(t *testing.T) (caFile string, server *tls.Config) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "practicegw test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile = writeFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	return caFile, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
