package rpc

import (
	"context"
	"fmt"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/turn"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/proxy"
)

// outgoingMetadata returns the metadata a call made with ctx carries,
// refusing, before anything is sent, metadata over the limits.
func outgoingMetadata(ctx context.Context, call proxy.Call) ([]string, error) {
	md := turn.Outgoing(ctx)
	if md == nil {
		return nil, nil
	}
	if err := wire.CheckMetadata(md); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", proxy.ErrBadRequest, call.Method.FullName(), err)
	}
	return md, nil
}

// identityOf is what a silo that relays a request said of its caller.
// Kinds and credentials this version does not know pass as they are.
func identityOf(w *wire.Identity) actor.Identity {
	return actor.Identity{Kind: actor.CallerKind(w.Kind), Name: w.Name,
		Rights: actor.Rights(w.Rights), Credential: actor.Credential(w.Credential)}
}

// setWire sets w to id, for a relayed request.
func setWire(w *wire.Identity, id actor.Identity) {
	*w = wire.Identity{Kind: uint32(id.Kind), Name: id.Name, Rights: uint32(id.Rights), Credential: uint32(id.Credential)}
}
