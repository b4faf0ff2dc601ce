package proxy

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
)

// MethodID derives the stable wire identifier of a method from its service's
// full protobuf name and the method name: FNV-1a (32 bit) of "service/method".
// It never depends on declaration order, so adding or reordering methods
// keeps old ids valid. The generator refuses a service whose ids collide.
func MethodID(service, method string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(service))
	h.Write([]byte{'/'})
	h.Write([]byte(method))
	return h.Sum32()
}

// MethodDesc describes one grain method as both ends see it.
type MethodDesc struct {
	// Service is the full protobuf name of the service, which is also the
	// grain type.
	Service string
	// Name is the method name.
	Name string
	// ID is MethodID(Service, Name), carried on the wire.
	ID uint32
	// Bounded methods receive a time budget from the reference (see Ref).
	Bounded bool
}

// FullName returns "service/method".
func (m *MethodDesc) FullName() string { return m.Service + "/" + m.Name }

// Method is the server side of one grain method, filled in by generated code.
type Method struct {
	// Desc describes the method.
	Desc *MethodDesc
	// NewRequest returns an empty request message to decode into.
	NewRequest func() proto.Message
	// Invoke calls the grain's implementation. grain is the activation's
	// grain value; req was returned by NewRequest.
	Invoke func(ctx context.Context, grain any, req proto.Message) (proto.Message, error)
}

// ServiceDesc is the server side of a grain contract: its grain type and a
// table of methods. Generated code declares one per service.
type ServiceDesc struct {
	// Name is the full protobuf service name and the grain type.
	Name string
	// Methods lists every method of the service.
	Methods []Method
	// HandlerType is a nil pointer to the generated server interface, used
	// to check that a grain implements it at registration.
	HandlerType any

	once  sync.Once
	index map[uint32]*Method
}

// linearMethods is the size up to which Method scans instead of indexing.
const linearMethods = 8

// Method returns the method with the given id, or nil.
func (s *ServiceDesc) Method(id uint32) *Method {
	if len(s.Methods) <= linearMethods {
		// A few comparisons beat hashing into a map.
		for i := range s.Methods {
			if s.Methods[i].Desc.ID == id {
				return &s.Methods[i]
			}
		}
		return nil
	}
	s.once.Do(func() {
		s.index = make(map[uint32]*Method, len(s.Methods))
		for i := range s.Methods {
			s.index[s.Methods[i].Desc.ID] = &s.Methods[i]
		}
	})
	return s.index[id]
}

// Validate reports whether the descriptor is usable: a name, methods that
// belong to it, and ids that match their names and do not collide.
func (s *ServiceDesc) Validate() error {
	if s.Name == "" {
		return fmt.Errorf("%w: service has no name", ErrInvalidDescriptor)
	}
	seen := make(map[uint32]string, len(s.Methods))
	for i := range s.Methods {
		m := &s.Methods[i]
		if m.Desc == nil || m.NewRequest == nil || m.Invoke == nil {
			return fmt.Errorf("%w: %s method %d is incomplete", ErrInvalidDescriptor, s.Name, i)
		}
		if m.Desc.Service != s.Name || m.Desc.ID != MethodID(m.Desc.Service, m.Desc.Name) {
			return fmt.Errorf("%w: %s has a stale id", ErrInvalidDescriptor, m.Desc.FullName())
		}
		if other, dup := seen[m.Desc.ID]; dup {
			return fmt.Errorf("%w: %s and %s share id %#x", ErrInvalidDescriptor, other, m.Desc.Name, m.Desc.ID)
		}
		seen[m.Desc.ID] = m.Desc.Name
	}
	return nil
}

// NewRef builds the untyped reference behind a generated typed reference.
// Generated constructors call it; users call the typed constructors. The
// caller's response timeout and outgoing filters are resolved here, once,
// so a call looks nothing up.
func NewRef(c Caller, grainType, key string) Ref {
	r := Ref{caller: c, id: actor.GrainID{Type: grainType, Key: key}, timeout: c.ResponseTimeout()}
	if f, ok := c.(outgoingFilterer); ok && len(f.OutgoingFilters()) > 0 {
		r.filtered = chainOutgoing(f.OutgoingFilters(), afterFilters(c)) // built once, not per call
	}
	return r
}
