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
	tlsCert, tlsKey, tlsCA  string
	clientTokensFile        string
	clientCA                string // the CA of client certificates
	clientCertsFile         string // rights of client certificate names
	httpTLSCert, httpTLSKey string

	// What apply builds for the HTTP and admin ports.
	httpTLS      *tls.Config // nil: plain HTTP
	certificates []silo.ClientCertificate
	auth         httpAuth
}

func defineCredentialFlags(s *settings, f *credentialFlags) {
	s.stringVar(&f.tlsCert, "tls-cert", "GRANARY_TLS_CERT", "", "the silo's certificate (PEM): TLS on the gateway and the links, and the certificate the silo shows other silos")
	s.stringVar(&f.tlsKey, "tls-key", "GRANARY_TLS_KEY", "", "the key of -tls-cert (PEM)")
	s.stringVar(&f.tlsCA, "tls-ca", "GRANARY_TLS_CA", "", "the CA (PEM) that signs the silos' certificates: links need a certificate from it (mutual TLS), and the silo trusts the silos it dials by it")
	s.stringVar(&f.clientTokensFile, "client-tokens-file", "GRANARY_CLIENT_TOKENS_FILE", "", "a file of client tokens, one a line: name:rights:secret-in-hex (rights: none or admin); the gateway then admits only clients that prove one, and the HTTP and admin ports take a token's secret as Authorization: Bearer <secret-in-hex>")
	s.stringVar(&f.clientCA, "client-ca", "GRANARY_CLIENT_CA", "", "the CA (PEM) of client certificates: the gateway (with -tls-cert) and the HTTP and admin ports (with -http-tls-cert) verify a certificate a client shows against it (mutual TLS); a client without one is admitted as before")
	s.stringVar(&f.clientCertsFile, "client-certs-file", "GRANARY_CLIENT_CERTS_FILE", "", "a file of the rights of client certificates, one a line: name:rights (the certificate's common name, else its first DNS name; rights: none or admin); needs -client-ca")
	s.stringVar(&f.httpTLSCert, "http-tls-cert", "GRANARY_HTTP_TLS_CERT", "", "the certificate (PEM) of the HTTP and admin ports: they then serve HTTPS only (may be -tls-cert's file)")
	s.stringVar(&f.httpTLSKey, "http-tls-key", "GRANARY_HTTP_TLS_KEY", "", "the key of -http-tls-cert (PEM)")
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
	if err := f.applyClientCertificates(o); err != nil {
		errs = append(errs, err)
	}
	if f.httpTLSCert != "" || f.httpTLSKey != "" {
		if err := f.applyHTTPTLS(); err != nil {
			errs = append(errs, err)
		}
	}
	f.auth = httpAuth{tokens: o.Security.ClientTokens, certificates: f.certificates}
	return errors.Join(errs...)
}

// applyClientCertificates makes the gateway verify the certificates
// clients show against -client-ca, with the rights -client-certs-file
// grants them.
func (f *credentialFlags) applyClientCertificates(o *silo.Options) error {
	var errs []error
	if f.clientCertsFile != "" {
		if f.clientCA == "" {
			errs = append(errs, errors.New("-client-certs-file needs -client-ca: no client certificate is verified without it"))
		}
		certs, err := readClientCertificates(f.clientCertsFile)
		if err != nil {
			errs = append(errs, err)
		}
		o.Security.ClientCertificates, f.certificates = certs, certs
	}
	if f.clientCA == "" {
		return errors.Join(errs...)
	}
	if f.tlsCert == "" && f.httpTLSCert == "" {
		errs = append(errs, errors.New("-client-ca needs -tls-cert (the gateway) or -http-tls-cert (the HTTP ports): client certificates come over TLS"))
	}
	pool, err := readCertPool("-client-ca", f.clientCA)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if o.Security.TLS != nil {
		o.Security.TLS.ClientAuth, o.Security.TLS.ClientCAs = tls.VerifyClientCertIfGiven, pool
	} else if len(o.Security.ClientCertificates) > 0 {
		o.Security.ClientCertificates = nil // rights for the HTTP ports only: the gateway has no TLS to verify them with
	}
	return errors.Join(errs...)
}

// applyHTTPTLS builds the TLS of the HTTP and admin ports.
func (f *credentialFlags) applyHTTPTLS() error {
	if f.httpTLSCert == "" || f.httpTLSKey == "" {
		return errors.New("-http-tls-cert and -http-tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(f.httpTLSCert, f.httpTLSKey)
	if err != nil {
		return fmt.Errorf("-http-tls-cert: %w", err)
	}
	f.httpTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.clientCA != "" {
		pool, err := readCertPool("-client-ca", f.clientCA)
		if err != nil {
			return err
		}
		f.httpTLS.ClientAuth, f.httpTLS.ClientCAs = tls.VerifyClientCertIfGiven, pool
	}
	return nil
}

// readCertPool reads the PEM certificates of a CA file.
func readCertPool(flag, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s: no PEM certificate", flag, path)
	}
	return pool, nil
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
	pool, err := readCertPool("-tls-ca", f.tlsCA)
	if err != nil {
		return err
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
	err := eachCredential(path, data, "name:rights:secret", func(name string, r actor.Rights, rest string) error {
		secret, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return errors.New("want name:rights:secret")
		}
		key, err := hex.DecodeString(strings.TrimSpace(secret))
		if err != nil {
			return errors.New("the secret is not hex")
		}
		tokens = append(tokens, silo.ClientToken{Name: name, Secret: key, Rights: r})
		return nil
	})
	return tokens, err
}

// readClientCertificates reads a client certificates file: one a line,
// name:rights; blank lines and lines starting with # are skipped.
func readClientCertificates(path string) ([]silo.ClientCertificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-client-certs-file: %w", err)
	}
	return parseClientCertificates(path, data)
}

func parseClientCertificates(path string, data []byte) ([]silo.ClientCertificate, error) {
	var certs []silo.ClientCertificate
	err := eachCredential(path, data, "name:rights", func(name string, r actor.Rights, rest string) error {
		if rest != "" {
			return errors.New("want name:rights")
		}
		certs = append(certs, silo.ClientCertificate{Name: name, Rights: r})
		return nil
	})
	return certs, err
}

// eachCredential calls fn with the name, the rights and what follows
// them (from its ":" on) of each line of a credentials file, skipping
// blank lines and lines starting with #. It reports every bad line, by
// its number.
func eachCredential(path string, data []byte, want string, fn func(name string, r actor.Rights, rest string) error) error {
	var errs []error
	lines := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; lines.Scan(); n++ {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			errs = append(errs, fmt.Errorf("%s:%d: want %s", path, n, want))
			continue
		}
		rights, tail, _ := strings.Cut(rest, ":")
		if strings.Contains(rest, ":") {
			tail = ":" + tail
		}
		r, err := actor.ParseRights(rights)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", path, n, err))
		}
		if err := fn(strings.TrimSpace(name), r, tail); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", path, n, err))
		}
	}
	if err := lines.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", path, err))
	}
	return errors.Join(errs...)
}
