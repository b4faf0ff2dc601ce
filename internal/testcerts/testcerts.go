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
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("testcerts: create CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("testcerts: parse CA: %v", err)
	}
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
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatalf("testcerts: issue %s: %v", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("testcerts: parse %s: %v", name, err)
	}
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
