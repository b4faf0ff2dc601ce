// Package grainrt links package actor, the grain programming model users
// see, to the activation host behind it (internal/host), which imports
// actor: actor sets these functions when it is initialised, and the host
// calls them to build the values it hands to grains, so that actor's types
// keep their implementation out of the public API.
package grainrt

// Set by package actor.
var (
	// NewContext returns an *actor.Context whose methods call rt.
	NewContext func(rt any) any
	// InitDeferred makes pub, an *actor.Deferred, call rt.
	InitDeferred func(pub, rt any)
	// InitTimer makes pub, an *actor.Timer, call rt.
	InitTimer func(pub, rt any)
)
