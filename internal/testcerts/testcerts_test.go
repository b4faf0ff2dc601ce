package testcerts

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCertificatesVerifyAgainstTheirCAOnly(t *testing.T) {
	ca, other := NewCA(t, "ca"), NewCA(t, "other")
	cert := ca.Certificate(t, "node")
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		_, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{usage}})
		assert.NoError(t, err)
	}
	_, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "127.0.0.1"})
	assert.NoError(t, err, "IP hosts become IP names")
	_, err = cert.Leaf.Verify(x509.VerifyOptions{Roots: other.Pool()})
	assert.Error(t, err, "another CA does not vouch for it")
}

func TestServerAndClientConfigsHandshake(t *testing.T) {
	ca := NewCA(t, "ca")
	server := ca.ServerConfig(t)
	server.ClientAuth, server.ClientCAs = tls.RequireAndVerifyClientCert, ca.Pool()
	client := ca.ClientConfig()
	client.Certificates = []tls.Certificate{ca.Certificate(t, "client")}
	client.ServerName = "127.0.0.1"

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	errs := make(chan error, 1)
	go func() { errs <- tls.Server(a, server).Handshake() }()
	require.NoError(t, tls.Client(b, client).Handshake())
	require.NoError(t, <-errs)
}
