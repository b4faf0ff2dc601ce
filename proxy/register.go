package proxy

import "github.com/granary-go/granary/actor"

// Registrar accepts grain types. A silo is one; generated RegisterXGrain
// functions call it with the service descriptor and a factory.
type Registrar interface {
	// RegisterGrain makes a grain type available: desc describes its
	// methods and factory creates the grain value of a new activation.
	RegisterGrain(desc *ServiceDesc, factory func(id actor.GrainID) any) error
}
