package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// authority is a cluster's own certificate authority, written to files
// as an operator would give them.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

func newAuthority(t *testing.T) *authority {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "practicegw cluster"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	a := &authority{cert: cert, key: key, dir: t.TempDir()}
	writePEM(t, filepath.Join(a.dir, "ca.pem"), "CERTIFICATE", der)
	return a
}

// issue writes an instance's certificate and key, good for both ends of
// a connection, for 127.0.0.1.
func (a *authority) issue(t *testing.T, name string) InternalTLS {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	files := InternalTLS{CA: filepath.Join(a.dir, "ca.pem"), Cert: filepath.Join(a.dir, name+".pem"), Key: filepath.Join(a.dir, name+"-key.pem")}
	writePEM(t, files.Cert, "CERTIFICATE", der)
	writePEM(t, files.Key, "EC PRIVATE KEY", keyDER)
	return files
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The internal listener over TLS answers an instance whose certificate
// the cluster's authority signed, and no one else: not a client without
// a certificate, nor one of another authority; and an instance does not
// forward to a listener whose certificate the authority did not sign.
func TestInternalListenerTakesOnlyTheClustersCertificates(t *testing.T) {
	ca := newAuthority(t)
	serverTLS, _, err := ca.issue(t, "gw1").Configs()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := ServeInternal(ln, serverTLS, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "answered")
	}), nil)
	defer srv.Close(t.Context())
	url := "https://" + ln.Addr().String() + "/_practicegw/forwarded/v1/clients"

	get := func(cfg *tls.Config) error {
		resp, err := newForwardClient(cfg).Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "answered" {
			t.Fatalf("answered %q", body)
		}
		return nil
	}
	_, peer, _ := ca.issue(t, "gw2").Configs()
	if err := get(peer); err != nil {
		t.Fatalf("an instance of the cluster: %v", err)
	}
	noCert := peer.Clone()
	noCert.Certificates = nil
	if err := get(noCert); err == nil {
		t.Error("a client without a certificate was answered")
	}
	_, stranger, _ := newAuthority(t).issue(t, "outsider").Configs()
	stranger.RootCAs = peer.RootCAs // it trusts our listener, but we do not trust it
	if err := get(stranger); err == nil {
		t.Error("a client of another authority was answered")
	}
	_, ours, _ := newAuthority(t).issue(t, "gw3").Configs()
	if err := get(ours); err == nil {
		t.Error("forwarded to a listener the cluster's authority did not sign")
	}
	if _, _, err := (InternalTLS{CA: "ca.pem"}).Configs(); err == nil {
		t.Error("internal_tls without a certificate taken")
	}
}
