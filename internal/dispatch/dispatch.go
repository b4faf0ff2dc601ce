// Package dispatch runs grain methods for the activation host: it decodes
// a request, applies the silo's incoming filters when there are any, and
// calls the grain's method through its generated service descriptor.
package dispatch

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/proxy"
)

// Dispatcher runs a service's methods for the actor runtime: it decodes the
// request, applies incoming filters when there are any, and calls the
// grain. The filter chain is built once, on the first dispatch, so Filters
// must not change afterwards; at its end the call runs the method that
// IncomingCall.Method names.
type Dispatcher struct {
	// Service is the grain type's contract.
	Service *proxy.ServiceDesc
	// Filters run around every method, in order.
	Filters []proxy.IncomingFilter

	chainOnce sync.Once
	chain     proxy.IncomingInvoker // Filters chained before the method, built on first use
}

var _ host.Dispatcher = (*Dispatcher)(nil)

// MethodName returns the name of the method with the given id, or "".
func (d *Dispatcher) MethodName(id uint32) string {
	if m := d.Service.Method(id); m != nil {
		return m.Desc.Name
	}
	return ""
}

// MethodIDs returns the ids of the service's methods, in the contract's
// order: the host keeps a call counter for each.
func (d *Dispatcher) MethodIDs() []uint32 {
	ids := make([]uint32, len(d.Service.Methods))
	for i := range d.Service.Methods {
		ids[i] = d.Service.Methods[i].Desc.ID
	}
	return ids
}

// Dispatch implements host.Dispatcher.
func (d *Dispatcher) Dispatch(ctx context.Context, grain any, methodID uint32, payload []byte) (proto.Message, error) {
	m := d.Service.Method(methodID)
	if m == nil {
		return nil, fmt.Errorf("%w: %#x on %s", proxy.ErrUnknownMethod, methodID, d.Service.Name)
	}
	req := m.NewRequest()
	if err := proxy.UnmarshalFresh(payload, req); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", proxy.ErrBadRequest, m.Desc.FullName(), err)
	}
	if len(d.Filters) == 0 {
		// The direct path: no call record, no chain.
		return m.Invoke(ctx, grain, req)
	}
	d.chainOnce.Do(func() {
		next := func(ctx context.Context, c *proxy.IncomingCall) (proto.Message, error) {
			m := d.Service.Method(c.Method.ID)
			if m == nil {
				return nil, fmt.Errorf("%w: %s", proxy.ErrUnknownMethod, c.Method.FullName())
			}
			return m.Invoke(ctx, c.Grain, c.Request)
		}
		for i := len(d.Filters) - 1; i >= 0; i-- {
			f, n := d.Filters[i], next
			next = func(ctx context.Context, c *proxy.IncomingCall) (proto.Message, error) { return f(ctx, c, n) }
		}
		d.chain = next
	})
	return d.chain(ctx, &proxy.IncomingCall{Grain: grain, Method: m.Desc, Request: req})
}
