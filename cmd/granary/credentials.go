package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/silo"
)

// credentialFlags are the files that hold the silo's TLS material and the
// clients' tokens.
type credentialFlags struct {
	tlsCert, tlsKey, tlsCA string
	clientTokensFile       string
}

func defineCredentialFlags(s *settings, f *credentialFlags) {
	s.stringVar(&f.tlsCert, "tls-cert", "GRANARY_TLS_CERT", "", "the silo's certificate (PEM): TLS on the gateway and the links, and the certificate the silo shows other silos")
	s.stringVar(&f.tlsKey, "tls-key", "GRANARY_TLS_KEY", "", "the key of -tls-cert (PEM)")
	s.stringVar(&f.tlsCA, "tls-ca", "GRANARY_TLS_CA", "", "the CA (PEM) that signs the silos' certificates: links need a certificate from it (mutual TLS), and the silo trusts the silos it dials by it")
	s.stringVar(&f.clientTokensFile, "client-tokens-file", "GRANARY_CLIENT_TOKENS_FILE", "", "a file of client tokens, one a line: name:rights:secret-in-hex (rights: none or admin); the gateway then admits only clients that prove one")
}

// apply sets the silo's TLS configurations and client tokens from the
// files named, reporting every problem.
func (f *credentialFlags) apply(o *silo.Options) error {
	var errs []error
	if f.tlsCert != "" || f.tlsKey != "" || f.tlsCA != "" {
		if err := f.applyTLS(o); err != nil {
			errs = append(errs, err)
		}
	}
	if f.clientTokensFile != "" {
		tokens, err := readClientTokens(f.clientTokensFile)
		if err != nil {
			errs = append(errs, err)
		}
		o.Security.ClientTokens = tokens
	}
	return errors.Join(errs...)
}

func (f *credentialFlags) applyTLS(o *silo.Options) error {
	if f.tlsCert == "" || f.tlsKey == "" {
		return errors.New("-tls-cert and -tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
	if err != nil {
		return fmt.Errorf("-tls-cert: %w", err)
	}
	o.Security.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.tlsCA == "" {
		return nil
	}
	if !o.Cluster.Enabled {
		return errors.New("-tls-ca is for the links between silos: it needs -silo-address")
	}
	pem, err := os.ReadFile(f.tlsCA)
	if err != nil {
		return fmt.Errorf("-tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("-tls-ca %s: no PEM certificate", f.tlsCA)
	}
	// Mutual TLS between silos, with a listener of its own so that the
	// gateway asks clients for no certificate (and a client certificate
	// never opens a link).
	o.Security.LinkTLS = &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
		MinVersion: tls.VersionTLS12,
	}
	o.Security.DialTLS = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return nil
}

// readClientTokens reads a client tokens file: one token a line,
// name:rights:secret with the secret in hex; blank lines and lines
// starting with # are skipped.
func readClientTokens(path string) ([]silo.ClientToken, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-client-tokens-file: %w", err)
	}
	return parseClientTokens(path, data)
}

func parseClientTokens(path string, data []byte) ([]silo.ClientToken, error) {
	var tokens []silo.ClientToken
	var errs []error
	lines := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; lines.Scan(); n++ {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok1 := strings.Cut(line, ":")
		rights, secret, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			errs = append(errs, fmt.Errorf("%s:%d: want name:rights:secret", path, n))
			continue
		}
		r, err := actor.ParseRights(rights)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", path, n, err))
		}
		key, err := hex.DecodeString(strings.TrimSpace(secret))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: the secret is not hex", path, n))
		}
		tokens = append(tokens, silo.ClientToken{Name: strings.TrimSpace(name), Secret: key, Rights: r})
	}
	if err := lines.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", path, err))
	}
	return tokens, errors.Join(errs...)
}
