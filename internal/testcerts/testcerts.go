// Package testcerts makes certificate authorities and certificates in memory,
// for tests that need TLS or mutual TLS without files on disk or a network.
//
//	ca := testcerts.NewCA(t, "cluster CA")
//	server := ca.ServerConfig(t)           // a certificate for 127.0.0.1, ::1 and localhost
//	client := ca.ClientConfig()            // trusts ca
//	client.Certificates = []tls.Certificate{ca.Certificate(t, "client")} // for mutual TLS
//	server.ClientAuth, server.ClientCAs = tls.RequireAndVerifyClientCert, ca.Pool()
//
// Keys are ECDSA P-256; certificates are valid from an hour ago for a day.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// CA is a certificate authority that lives in memory.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

// NewCA returns a new self-signed CA named name. It fails tb on error.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := template(tb, name)
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	_, cert := sign(tb, tmpl, tmpl, key, key)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{cert: cert, key: key, pool: pool}
}

// Pool returns a pool holding only the CA's certificate, for RootCAs or
// ClientCAs.
func (ca *CA) Pool() *x509.CertPool { return ca.pool }

// Certificate issues a certificate and key named name, good for both server
// and client authentication. Each host becomes an IP or DNS subject
// alternative name; without hosts the certificate names 127.0.0.1, ::1 and
// localhost. It fails tb on error.
func (ca *CA) Certificate(tb testing.TB, name string, hosts ...string) tls.Certificate {
	tb.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "::1", "localhost"}
	}
	key := newKey(tb)
	tmpl := template(tb, name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, leaf := sign(tb, tmpl, ca.cert, key, ca.key)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// ServerConfig returns a server configuration with a certificate the CA
// issued for hosts (see Certificate). It asks for no client certificate; set
// ClientAuth and ClientCAs for mutual TLS.
func (ca *CA) ServerConfig(tb testing.TB, hosts ...string) *tls.Config {
	tb.Helper()
	return &tls.Config{
		Certificates: []tls.Certificate{ca.Certificate(tb, "server", hosts...)},
		MinVersion:   tls.VersionTLS12,
	}
}

// ClientConfig returns a client configuration that trusts only the CA. Add
// Certificates for mutual TLS.
func (ca *CA) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
}

// template returns what every certificate here has: a random serial, the
// name, and a validity from an hour ago for a day.
func template(tb testing.TB, name string) *x509.Certificate {
	tb.Helper()
	return &x509.Certificate{
		SerialNumber: serial(tb),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

// sign makes the certificate tmpl describes for key, signed by parent's
// signer, and returns it encoded and parsed.
func sign(tb testing.TB, tmpl, parent *x509.Certificate, key, signer *ecdsa.PrivateKey) ([]byte, *x509.Certificate) {
	tb.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		tb.Fatalf("testcerts: create %s: %v", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("testcerts: parse %s: %v", tmpl.Subject.CommonName, err)
	}
	return der, cert
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("testcerts: key: %v", err)
	}
	return key
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatalf("testcerts: serial: %v", err)
	}
	return n
}

// PEM returns the CA's certificate in PEM, for programs that read a CA
// from a file.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// PEMFiles returns cert's certificate and key in PEM, for programs that
// read them from files. It fails tb on error.
func PEMFiles(tb testing.TB, cert tls.Certificate) (certPEM, keyPEM []byte) {
	tb.Helper()
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		tb.Fatalf("testcerts: %v", err)
	}
	for _, der := range cert.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})
}
