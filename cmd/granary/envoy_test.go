package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/granary-go/granary/internal/testcerts"
)

// TestRunServesEnvoysRateLimitService: with -envoy-rls the binary answers
// ShouldRateLimit from the file's limits, and stops the port with the
// silo.
func TestRunServesEnvoysRateLimitService(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(rules, []byte("domain: edge\ndescriptors: [{key: remote_address, rate_limit: {unit: hour, requests_per_unit: 2}}]\n"), 0o600))
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	defer outR.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer devnull.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-gateway", "none", "-name", "envoy-test", "-envoy-rls", "127.0.0.1:0", "-envoy-rls-config", rules, "-envoy-rls-headers"}, outW, devnull)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	require.True(t, lines.Scan())
	first := lines.Text()
	require.Contains(t, first, "Envoy rate limit service on 127.0.0.1:")
	addr := strings.TrimSuffix(strings.Fields(strings.SplitAfter(first, "service on ")[1])[0], ",")

	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}}}}
	var codes []rlsv3.RateLimitResponse_Code
	for range 3 {
		callCtx, callCancel := context.WithTimeout(ctx, 20*time.Second)
		resp, err := client.ShouldRateLimit(callCtx, req)
		callCancel()
		require.NoError(t, err)
		codes = append(codes, resp.GetOverallCode())
		require.Len(t, resp.GetResponseHeadersToAdd(), 3)
	}
	require.Equal(t, []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT}, codes)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("silo did not stop")
	}
}

// TestEnvoyFlagsReportEveryProblem: a bad limits file fails the start
// with its problems, beside the other settings' own.
func TestEnvoyFlagsReportEveryProblem(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(rules, []byte("domain: edge\ndescriptors: [{key: a, rate_limit: {unit: fortnight}}, {value: b}]\n"), 0o600))
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer devnull.Close()
	_, err = parseConfig([]string{"-envoy-rls", "127.0.0.1:0", "-envoy-rls-config", rules, "-stop-timeout", "0s"}, devnull)
	require.ErrorContains(t, err, `unit "fortnight"`)
	require.ErrorContains(t, err, "the key is empty")
	require.ErrorContains(t, err, "-stop-timeout must be positive")

	_, err = parseConfig([]string{"-envoy-rls", "127.0.0.1:0"}, devnull)
	require.ErrorContains(t, err, "-envoy-rls needs -envoy-rls-config")
}

// TestTheEnvoyPortServesMutualTLS: with -envoy-rls-tls-cert the port
// speaks gRPC over TLS only, and with -envoy-rls-client-ca it answers only
// clients showing a certificate of that CA.
func TestTheEnvoyPortServesMutualTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "granary test CA")
	certPEM, keyPEM := testcerts.PEMFiles(t, ca.Certificate(t, "silo"))
	rules := writeFile(t, "rules.yaml", "domain: edge\ndescriptors: [{key: remote_address, rate_limit: {unit: hour, requests_per_unit: 5}}]\n")
	line := startServing(t, "-envoy-rls", "127.0.0.1:0", "-envoy-rls-config", rules,
		"-envoy-rls-tls-cert", writeFile(t, "cert.pem", string(certPEM)), "-envoy-rls-tls-key", writeFile(t, "key.pem", string(keyPEM)),
		"-envoy-rls-client-ca", writeFile(t, "ca.pem", string(ca.PEM())))
	require.Contains(t, line, "(TLS)")
	addr := addressAfter(t, line, "Envoy rate limit service on ")

	ask := func(creds credentials.TransportCredentials) (*rlsv3.RateLimitResponse, error) {
		conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
		require.NoError(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0.0.1"}}}}})
	}
	envoy := ca.ClientConfig()
	envoy.Certificates = []tls.Certificate{ca.Certificate(t, "envoy")}
	resp, err := ask(credentials.NewTLS(envoy))
	require.NoError(t, err, "an Envoy with a certificate of the CA is answered")
	require.Equal(t, uint32(4), resp.GetStatuses()[0].GetLimitRemaining())

	_, err = ask(credentials.NewTLS(ca.ClientConfig()))
	require.Error(t, err, "a client without a certificate is not")
	_, err = ask(insecure.NewCredentials())
	require.Error(t, err, "nor one in clear text")
	stranger := testcerts.NewCA(t, "another CA")
	other := ca.ClientConfig()
	other.Certificates = []tls.Certificate{stranger.Certificate(t, "envoy")}
	_, err = ask(credentials.NewTLS(other))
	require.Error(t, err, "nor one whose certificate another CA signed")
}

// TestEnvoyTLSFlagsAreChecked: the port's TLS flags report their
// problems with the others'.
func TestEnvoyTLSFlagsAreChecked(t *testing.T) {
	ca := testcerts.NewCA(t, "granary test CA")
	certPEM, keyPEM := testcerts.PEMFiles(t, ca.Certificate(t, "silo"))
	cert, key := writeFile(t, "cert.pem", string(certPEM)), writeFile(t, "key.pem", string(keyPEM))
	rules := writeFile(t, "rules.yaml", "domain: edge\ndescriptors: [{key: a, rate_limit: {unit: fortnight}}]\n")
	_, err := parseConfig([]string{"-envoy-rls", "127.0.0.1:0", "-envoy-rls-config", rules, "-envoy-rls-tls-cert", cert}, devNull(t))
	require.ErrorContains(t, err, "-envoy-rls-tls-cert and -envoy-rls-tls-key go together")
	require.ErrorContains(t, err, `unit "fortnight"`, "beside the limits' own")
	_, err = parseConfig([]string{"-envoy-rls-tls-cert", cert, "-envoy-rls-tls-key", key}, devNull(t))
	require.ErrorContains(t, err, "need -envoy-rls")
	good := writeFile(t, "good.yaml", "domain: edge\ndescriptors: [{key: a, rate_limit: {unit: hour, requests_per_unit: 1}}]\n")
	_, err = parseConfig([]string{"-envoy-rls", "127.0.0.1:0", "-envoy-rls-config", good, "-envoy-rls-tls-cert", cert, "-envoy-rls-tls-key", key,
		"-envoy-rls-client-ca", writeFile(t, "bad.pem", "not a certificate")}, devNull(t))
	require.ErrorContains(t, err, "-envoy-rls-client-ca")
	require.ErrorContains(t, err, "no PEM certificate")
	_, err = parseConfig([]string{"-envoy-rls", "127.0.0.1:0", "-envoy-rls-config", good, "-envoy-rls-tls-cert", key, "-envoy-rls-tls-key", key}, devNull(t))
	require.ErrorContains(t, err, "-envoy-rls-tls-cert:")
}
