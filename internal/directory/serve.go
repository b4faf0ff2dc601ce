package directory

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/internal/directory/directorypb"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/ring"
	"github.com/granary-go/granary/proxy"
)

// Serve answers a request another silo sent to this silo's partition. It
// runs on the goroutine that delivers the request and never blocks: a
// request for a held range waits, parked, and is answered once the range
// is released.
func (d *Directory) Serve(req *host.Request) {
	reply, err, later := d.serve(req)
	if later {
		return
	}
	req.Reply.Reply(req, reply, err)
	req.Release()
}

// serve decodes and answers req; later is true when it parked req, to be
// served again once its range is released.
func (d *Directory) serve(req *host.Request) (reply proto.Message, err error, later bool) {
	m := directorypb.DirectoryService.Method(req.MethodID)
	if m == nil {
		return nil, fmt.Errorf("%w: %#x on %s", proxy.ErrUnknownMethod, req.MethodID, ServiceType), false
	}
	in := m.NewRequest()
	if err := proxy.UnmarshalFresh(req.Payload, in); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", proxy.ErrBadRequest, m.Desc.FullName(), err), false
	}
	switch in := in.(type) {
	case *directorypb.RegisterRequest:
		if err := d.refused(); err != nil {
			return nil, err, false
		}
		return d.serveOwned(req, in.GetGrain(), func() proto.Message {
			winner := d.registerLocked(grainOf(in.GetGrain()), activationOf(in.GetActivation()))
			return &directorypb.RegisterReply{Winner: pbActivation(winner)}
		})
	case *directorypb.LookupRequest:
		return d.serveOwned(req, in.GetGrain(), func() proto.Message {
			a, ok := d.mu.partition[grainOf(in.GetGrain())]
			if !ok || !d.liveLocked(a) {
				return &directorypb.LookupReply{}
			}
			return &directorypb.LookupReply{Found: true, Activation: pbActivation(a)}
		})
	case *directorypb.UnregisterRequest:
		d.mu.Lock()
		id, a := grainOf(in.GetGrain()), activationOf(in.GetActivation())
		if d.mu.partition[id] == a {
			delete(d.mu.partition, id)
		}
		d.mu.Unlock()
		return &directorypb.UnregisterReply{}, nil, false
	case *directorypb.HandoffRequest:
		lists := [][]*directorypb.Range{in.GetRanges(), in.GetUnfilled()}
		for _, g := range in.GetMourning() {
			lists = append(lists, g.GetRanges())
		}
		if err := badRanges(lists...); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", proxy.ErrBadRequest, m.Desc.FullName(), err), false
		}
		d.stats.handoffsReceived.Add(1)
		ranges := rangesOf(in.GetRanges())
		from := in.GetFrom()
		s := ring.Silo{ID: from.GetSilo(), Generation: from.GetGeneration()}
		d.mu.Lock()
		unfilled := rangesOf(in.GetUnfilled())
		graces := d.takeGracesLocked(Activation{Silo: s.ID, Generation: s.Generation}, in.GetMourning(), ranges, unfilled)
		losers := d.mergeLocked(in.GetEntries())
		// Only what this silo's view does not give it yet is remembered,
		// for the view that will (SetView), in the same critical section
		// as the entries: a view in between must see both or neither. A
		// range it owns now is done with once released.
		owned := d.mu.ring.Ranges(d.self.Silo)
		for _, r := range ranges {
			if !covered(r, owned) {
				d.mu.received[s] = append(d.mu.received[s], r)
			}
		}
		d.mu.Unlock()
		d.endGraces(graces)
		d.deactivateLosers(losers)
		d.release(ranges)
		d.receivedUnfilled(s, unfilled)
		return &directorypb.HandoffReply{}, nil, false
	case *directorypb.HostedRequest:
		if err := badRanges(in.GetRanges()); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", proxy.ErrBadRequest, m.Desc.FullName(), err), false
		}
		ranges := rangesOf(in.GetRanges())
		asked := graceRanges(ranges) // merged and bounded once, outside the lock
		d.mu.Lock()
		graces := d.handedGracesLocked(nil, asked)
		d.mu.Unlock()
		return &directorypb.HostedReply{Entries: d.hosted(ranges), Mourning: d.pbMourning(graces)}, nil, false
	case *directorypb.DeactivateRequest:
		if activationOf(in.GetActivation()) == d.self {
			d.host.Deactivate(grainOf(in.GetGrain()))
		}
		return &directorypb.DeactivateReply{}, nil, false
	}
	return nil, fmt.Errorf("%w: %s", proxy.ErrUnknownMethod, m.Desc.FullName()), false
}

// serveOwned runs op, under the directory's lock, for a request about a
// grain this silo owns: it refuses one this silo does not own (the
// caller's view differs; it tries again) and parks one whose range is
// held. One whose grain has no entry while a reclaim may bring one, or
// whose entry is of a silo in its death's grace (awaitsReclaimLocked), is
// refused as not yet known, and the caller tries again: parked, it could
// outlast the caller's try, and each try of it would park another copy.
func (d *Directory) serveOwned(req *host.Request, g *directorypb.GrainID, op func() proto.Message) (proto.Message, error, bool) {
	id := grainOf(g)
	h := ring.Hash(id)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return nil, fmt.Errorf("%w: %w", proxy.ErrUnavailable, ErrClosed), false
	}
	owner, ok := d.ownerLocked(h)
	if !ok || owner.ID != d.self.Silo {
		return nil, proxy.Errorf(codeNotOwner, "directory: %s does not own %s by its view", d.self.Silo, id), false
	}
	if d.heldLocked(h) {
		d.parkLocked(h, func() { d.Serve(req) })
		return nil, nil, true
	}
	if d.awaitsReclaimLocked(id, h) {
		return nil, fmt.Errorf("%w: directory: %s does not know yet whether a silo that left the view or came back runs %s", proxy.ErrUnavailable, d.self.Silo, id), false
	}
	return op(), nil, false
}
