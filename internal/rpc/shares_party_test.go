package rpc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
)

func token(name string) actor.Identity {
	return actor.Identity{Kind: actor.CallerClient, Name: name, Credential: actor.CredentialToken}
}

// The connections of one credential join one party, and busy together
// count as one client; connections that proved none are a client each; a
// party is forgotten when its last connection leaves.
func TestConnectionsOfOneCredentialAreOneClient(t *testing.T) {
	s := NewShares(ShareOptions{}, clock.NewFake(time.Unix(1_700_000_000, 0)))
	a1, a2 := s.join(token("a")), s.join(token("a"))
	b := s.join(token("b"))
	cert := s.join(actor.Identity{Kind: actor.CallerClient, Name: "a", Credential: actor.CredentialCertificate})
	anon1, anon2 := s.join(actor.Identity{Kind: actor.CallerClient}), s.join(actor.Identity{Kind: actor.CallerClient})
	assert.Same(t, a1, a2)
	assert.NotSame(t, a1, b)
	assert.NotSame(t, a1, cert, "a certificate and a token of one name are two clients")
	assert.NotSame(t, anon1, anon2)

	assert.EqualValues(t, 1, s.arrive(a1))
	assert.EqualValues(t, 1, s.arrive(a2), "a's second connection is the same client")
	assert.EqualValues(t, 2, s.arrive(b))
	assert.EqualValues(t, 3, s.arrive(anon1))
	assert.EqualValues(t, 4, s.arrive(anon2))
	assert.EqualValues(t, 4, s.busy())
	assert.Equal(t, 2*sharePause, a1.pause(), "a's two connections each wait twice as long after a refusal")
	assert.Equal(t, sharePause, anon1.pause())
	many := make([]*party, 100)
	for i := range many {
		many[i] = s.join(token("many"))
	}
	assert.Equal(t, maxSharePause, many[0].pause())
	for _, p := range many {
		s.leave(p)
	}

	s.leave(a1)
	assert.Same(t, a1, s.join(token("a")), "a has a connection open still")
	s.leave(a2)
	s.leave(a1)
	assert.NotSame(t, a1, s.join(token("a")), "a's last connection left: a later one starts afresh")
	s.leave(anon1) // a connection's own party is no one else's to forget
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Len(t, s.mu.parties, 3, "a (joined again), b and the certificate")
}
