package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/examples/counter"
)

const tokensFile = `# name:rights:secret (hex)
checkout:none:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff
ops:admin:ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100
`

func TestClientTokensFileIsParsed(t *testing.T) {
	tokens, err := parseClientTokens("tokens", []byte(tokensFile))
	require.NoError(t, err)
	require.Len(t, tokens, 2)
	assert.Equal(t, "checkout", tokens[0].Name)
	assert.Zero(t, tokens[0].Rights)
	assert.Equal(t, actor.RightAdmin, tokens[1].Rights)
	assert.Len(t, tokens[1].Secret, 32)

	_, err = parseClientTokens("tokens", []byte("no-colons\nx:root:00\ny:none:not-hex\n"))
	for _, want := range []string{"tokens:1: want name:rights:secret", `tokens:2: actor: unknown right "root"`, "tokens:3: the secret is not hex"} {
		assert.ErrorContains(t, err, want)
	}
}

// FuzzClientTokensFile: the parser never panics, and what it accepts has
// a name and a secret.
func FuzzClientTokensFile(f *testing.F) {
	f.Add([]byte(tokensFile))
	f.Add([]byte("a:admin,none:00\n#x\n\n:::\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tokens, err := parseClientTokens("f", data)
		if err != nil {
			return
		}
		for _, tok := range tokens {
			if strings.ContainsRune(tok.Name, ':') {
				t.Fatalf("name %q holds the separator", tok.Name)
			}
		}
	})
}

// With -client-tokens-file the binary's gateway admits only clients that
// prove a token.
func TestTheBinaryTakesClientTokensFromAFile(t *testing.T) {
	line := startServing(t, "-http", "none", "-client-tokens-file", writeFile(t, "tokens", tokensFile))
	gateway := addressAfter(t, line, "gateway listening on ")

	secret := make([]byte, 32)
	for i := range secret {
		secret[i] = byte(0x11 * (i % 16))
	}
	c, err := client.New(client.Options{Gateways: []string{gateway}, Token: &client.Token{Name: "checkout", Secret: secret}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = counter.NewCounterRef(c, "k").Add(context.Background(), &counter.AddRequest{Delta: 1})
	require.NoError(t, err)

	anon, err := client.New(client.Options{Gateways: []string{gateway}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = anon.Close() })
	assert.ErrorContains(t, anon.Connect(context.Background()), "requires a client credential")
}

// FuzzClientCertificatesFile: the parser never panics, and what it accepts
// has a name without the separator.
func FuzzClientCertificatesFile(f *testing.F) {
	f.Add([]byte("ops.example:admin\nviewer:none\n# a comment\n"))
	f.Add([]byte("a:admin:extra\n:\n::\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		certs, err := parseClientCertificates("f", data)
		if err != nil {
			return
		}
		for _, c := range certs {
			if strings.ContainsRune(c.Name, ':') {
				t.Fatalf("name %q holds the separator", c.Name)
			}
		}
	})
}

// FuzzBearerRights: whatever Authorization header an HTTP caller sends,
// it gets rights only by sending the secret of a token that has them.
func FuzzBearerRights(f *testing.F) {
	tokens, err := parseClientTokens("tokens", []byte(tokensFile))
	require.NoError(f, err)
	auth := httpAuth{tokens: tokens}
	f.Add("Bearer ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100")
	f.Add("Bearer 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
	f.Add("Bearer ")
	f.Add("Basic b3BzOnNlY3JldA==")
	f.Add("Bearer zz")
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("Authorization", header)
		got := auth.rightsOf(r)
		want := actor.Rights(0)
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if secret, err := hex.DecodeString(strings.TrimSpace(b)); err == nil {
				for _, tok := range tokens {
					if bytes.Equal(secret, tok.Secret) {
						want |= tok.Rights
					}
				}
			}
		}
		if got != want {
			t.Fatalf("%q grants %v, want %v", header, got, want)
		}
	})
}
