package main

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/testcerts"
)

// httpsClient is a client of the binary's HTTPS ports, trusting ca,
// showing the certificate named name when name is set.
func httpsClient(t *testing.T, ca *testcerts.CA, name string) *http.Client {
	t.Helper()
	cfg := ca.ClientConfig()
	if name != "" {
		cfg.Certificates = []tls.Certificate{ca.Certificate(t, name)}
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// configure posts a Configure of the rate-limit API to base, with the
// given Authorization header (none when empty), and returns the status
// and body.
func configure(t *testing.T, c *http.Client, base, authorization string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/granary.ratelimit.v1.RateLimitService/Configure",
		strings.NewReader(`{"algorithm":"ALGORITHM_CONCURRENCY","key":"k","options":{"concurrency":{"permitLimit":5}}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// With -http-tls-cert the HTTP and admin ports serve HTTPS only; with
// -client-ca they verify the certificates clients show. Changes on the
// admin port need the admin right: an admin token's secret as a bearer
// token, or a client certificate -client-certs-file grants it; every
// refusal names the right and is counted in
// granary_http_refusals_total.
func TestTheBinaryServesHTTPSAndChangesNeedAnAdminCredential(t *testing.T) {
	ca := testcerts.NewCA(t, "granary test CA")
	certPEM, keyPEM := testcerts.PEMFiles(t, ca.Certificate(t, "silo"))
	line := startServing(t, "-http", "127.0.0.1:0", "-admin", "127.0.0.1:0",
		"-http-tls-cert", writeFile(t, "cert.pem", string(certPEM)), "-http-tls-key", writeFile(t, "key.pem", string(keyPEM)),
		"-client-ca", writeFile(t, "ca.pem", string(ca.PEM())),
		"-client-certs-file", writeFile(t, "certs", "ops-cert:admin\nviewer:none\n"),
		"-client-tokens-file", writeFile(t, "tokens", tokensFile))
	public, admin := addressAfter(t, line, "HTTP on "), addressAfter(t, line, "admin on ")
	anonymous := httpsClient(t, ca, "")

	resp, err := anonymous.Get("https://" + public + "/healthz")
	require.NoError(t, err, "a TLS call works")
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	for _, addr := range []string{public, admin} {
		assert.Equal(t, http.StatusBadRequest, statusOf(t, "http://"+addr+"/healthz"), "%s refuses plain HTTP", addr)
	}

	base := "https://" + admin
	const opsSecret = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100" // tokensFile's admin token
	const checkoutSecret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	for name, tc := range map[string]struct {
		client        *http.Client
		authorization string
	}{
		"no credential":                 {anonymous, ""},
		"a token without the right":     {anonymous, "Bearer " + checkoutSecret},
		"a token nobody holds":          {anonymous, "Bearer 0badc0de"},
		"a certificate without a right": {httpsClient(t, ca, "viewer"), ""},
	} {
		status, body := configure(t, tc.client, base, tc.authorization)
		assert.Equal(t, http.StatusForbidden, status, "%s: %s", name, body)
		assert.Contains(t, body, "requires the admin right", name)
	}
	status, body := configure(t, anonymous, base, "Bearer "+opsSecret)
	assert.Equal(t, http.StatusOK, status, "an admin token: %s", body)
	status, body = configure(t, httpsClient(t, ca, "ops-cert"), base, "")
	assert.Equal(t, http.StatusOK, status, "an admin certificate: %s", body)

	resp, err = anonymous.Get("https://" + public + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(metrics), `granary_http_refusals_total{port="admin",reason="no_admin_right"} 4`)
}

// The TLS and client certificate flags report every problem at once.
func TestTLSFlagsAreChecked(t *testing.T) {
	ca := testcerts.NewCA(t, "granary test CA")
	certPEM, keyPEM := testcerts.PEMFiles(t, ca.Certificate(t, "silo"))
	cert, key := writeFile(t, "cert.pem", string(certPEM)), writeFile(t, "key.pem", string(keyPEM))
	_, err := parseConfig([]string{
		"-http-tls-cert", cert, // without its key
		"-client-certs-file", writeFile(t, "certs", "ops:root\nno-rights\n"), // without -client-ca, bad lines
	}, devNull(t))
	require.Error(t, err)
	for _, want := range []string{
		"-http-tls-cert and -http-tls-key go together",
		"-client-certs-file needs -client-ca",
		`certs:1: actor: unknown right "root"`,
		"certs:2: want name:rights",
	} {
		assert.ErrorContains(t, err, want)
	}
	_, err = parseConfig([]string{"-client-ca", writeFile(t, "ca.pem", string(ca.PEM()))}, devNull(t))
	assert.ErrorContains(t, err, "-client-ca needs -tls-cert (the gateway) or -http-tls-cert")
	_, err = parseConfig([]string{"-http-tls-cert", cert, "-http-tls-key", key, "-client-ca", writeFile(t, "bad.pem", "not a certificate")}, devNull(t))
	assert.ErrorContains(t, err, "no PEM certificate")
}
