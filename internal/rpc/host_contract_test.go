package rpc

import "github.com/granary-go/granary/internal/host"

// The call layer serves the activation host without importing it (a
// client links the call layer alone): these say that it still fits.
var (
	_ host.Router    = (*Router)(nil)
	_ host.Directory = (*StaticLocator)(nil)
	_ InlineInbound  = (*host.Host)(nil)
	_ Inbound        = (*host.Host)(nil)
	_ Activator      = (*host.Host)(nil)
)
