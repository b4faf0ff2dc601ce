package actor

import (
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/granary-go/granary/internal/turn"
	"github.com/granary-go/granary/internal/wire"
)

// CallerKind says what made a call.
type CallerKind uint8

// The kinds of caller.
const (
	// CallerClient is a client that called through a silo's gateway.
	CallerClient CallerKind = 1
	// CallerSilo is a silo: one of its grains, or its own code (its
	// caller, the HTTP API it serves).
	CallerSilo CallerKind = 2
)

func (k CallerKind) String() string {
	switch k {
	case CallerClient:
		return "client"
	case CallerSilo:
		return "silo"
	}
	return fmt.Sprintf("CallerKind(%d)", uint8(k))
}

// Credential says how a client proved who it is at the handshake.
type Credential uint8

// The credentials.
const (
	// CredentialNone: the client proved nothing (the gateway admits
	// anyone, or the cluster secret it proved is shared by all clients).
	CredentialNone Credential = 0
	// CredentialToken: the client proved a client token
	// (silo.ClientToken); the identity's Name is the token's.
	CredentialToken Credential = 1
	// CredentialCertificate: the client showed a TLS certificate that the
	// gateway verified; the identity's Name is the certificate's.
	CredentialCertificate Credential = 2
)

func (c Credential) String() string {
	switch c {
	case CredentialNone:
		return "none"
	case CredentialToken:
		return "token"
	case CredentialCertificate:
		return "certificate"
	}
	return fmt.Sprintf("Credential(%d)", uint8(c))
}

// Identity is who made a call, as the silo that admitted it established
// from the connection's handshake: never from anything the caller wrote
// in the call, so a client cannot claim another's identity or rights. A
// call a silo relays keeps the identity the first silo gave it.
type Identity struct {
	// Kind is what made the call.
	Kind CallerKind
	// Name names the caller: a silo's name; for a client the name of the
	// credential it proved (a token's name, or the subject common name of
	// its certificate, else its first DNS name), "" when it proved none.
	Name string
	// Credential is how a client proved itself; CredentialNone for a silo.
	Credential Credential
	// Rights are what the credential grants a client; a silo is never
	// asked for rights, and its identity carries none.
	Rights Rights
}

// IdentityOf returns the identity of the caller of the grain method (or
// incoming filter) whose context ctx is, or derives from; ok is false for
// a context that is not a method's. Calls between grains, and calls a
// silo makes itself, have a CallerSilo identity; calls through a gateway,
// a CallerClient one.
func IdentityOf(ctx context.Context) (id Identity, ok bool) {
	if p, _ := ctx.Value(turn.CallerKey{}).(*Identity); p != nil {
		return *p, true
	}
	return Identity{}, false
}

// Metadata are the string pairs a call carries: set by the caller with
// WithMetadata and read by the grain with MetadataOf, for what the
// runtime does not interpret (end users, tenants, trace context). They
// cross gateways and silo relays unchanged. A call carries at most
// MaxMetadataEntries pairs, of at most MaxMetadataBytes of keys and
// values together; a call over either fails with proxy.ErrBadRequest.
//
// Metadata are what the caller says, not what it proved: authorize with
// IdentityOf. The zero value is empty.
type Metadata struct {
	pairs []string
}

// The limits of a call's metadata.
const (
	MaxMetadataEntries = wire.MaxMetadataEntries
	MaxMetadataBytes   = wire.MaxMetadataBytes
)

// MetadataOf returns the metadata of the call whose grain method (or
// incoming filter) has the context ctx; empty for a call that carries
// none, and for a context that is not a method's.
func MetadataOf(ctx context.Context) Metadata {
	pairs, _ := ctx.Value(turn.MetadataKey{}).([]string)
	return Metadata{pairs: pairs}
}

// Len returns the number of entries.
func (m Metadata) Len() int { return len(m.pairs) / 2 }

// Get returns the value of key, "" when m has none. When a caller sent a
// key twice, the later value wins.
func (m Metadata) Get(key string) string {
	v, _ := m.Lookup(key)
	return v
}

// Lookup returns the value of key and whether m has it.
func (m Metadata) Lookup(key string) (value string, ok bool) {
	for i := len(m.pairs) - 2; i >= 0; i -= 2 {
		if m.pairs[i] == key {
			return m.pairs[i+1], true
		}
	}
	return "", false
}

// All yields the entries in the order the caller set them.
func (m Metadata) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for i := 0; i+1 < len(m.pairs); i += 2 {
			if !yield(m.pairs[i], m.pairs[i+1]) {
				return
			}
		}
	}
}

// Pairs returns the entries as key, value, key, value..., a copy: pass
// them to WithMetadata to send a call's metadata on with the calls its
// method makes, which does not happen by itself.
func (m Metadata) Pairs() []string { return slices.Clone(m.pairs) }

// WithMetadata returns a context whose grain calls carry the metadata of
// ctx with pairs (key, value, key, value...) added; a key ctx already
// has takes the new value. It panics when pairs has an odd length, as a
// programming error. The limits are checked when a call is made, which
// then fails with proxy.ErrBadRequest without being sent.
//
// The metadata a grain method received is not passed on by itself: a
// method that should pass it on says so, with
// WithMetadata(ctx, MetadataOf(ctx).Pairs()...).
func WithMetadata(ctx context.Context, pairs ...string) context.Context {
	if len(pairs)%2 != 0 {
		panic(fmt.Sprintf("actor: WithMetadata with %d strings, not key and value pairs", len(pairs)))
	}
	old := turn.Outgoing(ctx)
	md := make([]string, 0, len(old)+len(pairs))
	for i := 0; i < len(old); i += 2 {
		if !hasKey(pairs, old[i]) {
			md = append(md, old[i], old[i+1])
		}
	}
	md = append(md, pairs...)
	return context.WithValue(ctx, turn.OutgoingKey{}, md)
}

// hasKey reports whether pairs sets key.
func hasKey(pairs []string, key string) bool {
	for i := 0; i < len(pairs); i += 2 {
		if pairs[i] == key {
			return true
		}
	}
	return false
}
