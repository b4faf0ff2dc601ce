package dashboard

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/grains/ratelimit"
	dpb "github.com/granary-go/granary/internal/dashboard/dashboardpb"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/proxy"
)

// maxServing bounds the other silos' requests answered at a time; more
// are refused as unavailable. Each waits for one build of the part at
// most, which every silo asks for at most once per MinInterval a page.
const maxServing = 8

// partBudget bounds a build of the part for another silo. It outlasts the
// asker's timeout on purpose: a silo with many keys on a loaded machine
// may take longer than one PeerTimeout to build its part, and a build cut
// short at the asker's timeout would be dropped and started again at
// every ask, so that the silo never showed. Finished, it serves the next
// ask at once; the late answer to the first is dropped by its link.
const partBudget = 5 * time.Second

// errBusy refuses a request beyond maxServing, or after Close.
var errBusy = fmt.Errorf("dashboard: %w: too many requests for the silo's part, or closed", proxy.ErrUnavailable)

// part returns the silo's own part, built at most once per MinInterval
// with and without keys.
func (d *Dashboard) part(ctx context.Context, keys bool) (*dpb.SnapshotReply, error) {
	return d.parts[index(keys)].get(ctx, d.now, d.opts.MinInterval, func(ctx context.Context) *dpb.SnapshotReply {
		return d.build(ctx, keys)
	})
}

// buildPart builds the silo's part now: its activations, its calls from
// the instruments, its limiters' totals, and, with keys, its hottest
// limiter keys.
func (d *Dashboard) buildPart(ctx context.Context, keys bool) *dpb.SnapshotReply {
	p := &dpb.SnapshotReply{Silo: d.silo.Name(), BuiltUnixNano: d.now().UnixNano()}
	for _, m := range d.view().Members {
		if m.ID == p.Silo {
			p.Generation = m.Generation
		}
	}
	active := d.activeGrains()
	p.Activations = activationsByType(active)
	if d.gatherer != nil {
		p.Calls = callsOf(d.gatherer)
	}
	if st, ok := ratelimit.SiloStats(d.silo); ok {
		p.Limiters = &dpb.LimiterTotals{Granted: st.Granted, Rejected: st.Rejected, Queued: st.Queued,
			Expired: st.Expired, Cancelled: st.Cancelled, Waiting: st.Waiting}
	}
	if keys {
		p.Keys = d.hottestKeys(ctx, active)
	}
	return p
}

// serve answers another silo's request for this silo's part. It decodes
// the request on the delivering goroutine and builds the answer on one of
// its own, at most maxServing at a time, each within partBudget (or
// PeerTimeout, if longer).
func (d *Dashboard) serve(req *host.Request) {
	in, err := decodeRequest(req.MethodID, req.Payload)
	if err != nil {
		answer(req, nil, err)
		return
	}
	timeout := max(d.opts.PeerTimeout, partBudget)
	if !d.startServing() {
		answer(req, nil, errBusy)
		return
	}
	go func() {
		defer d.doneServing()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		p, err := d.part(ctx, in.GetKeys())
		if err != nil {
			answer(req, nil, fmt.Errorf("%w: %w", proxy.ErrUnavailable, err))
			return
		}
		answer(req, trimmed(p, in), nil)
	}()
}

func answer(req *host.Request, reply proto.Message, err error) {
	req.Reply.Reply(req, reply, err)
	req.Release()
}

// decodeRequest reads another silo's request: the only method is
// Snapshot.
func decodeRequest(methodID uint32, payload []byte) (*dpb.SnapshotRequest, error) {
	if methodID != dpb.Stats_Snapshot_Method.ID {
		return nil, fmt.Errorf("%w: %#x on %s", proxy.ErrUnknownMethod, methodID, dpb.StatsGrainType)
	}
	in := new(dpb.SnapshotRequest)
	if err := proxy.UnmarshalFresh(payload, in); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", proxy.ErrBadRequest, dpb.Stats_Snapshot_Method.Name, err)
	}
	if in.GetHottest() < 0 {
		return nil, fmt.Errorf("%w: %d hottest keys", proxy.ErrBadRequest, in.GetHottest())
	}
	return in, nil
}

// trimmed is p with at most the keys asked for (0: as many as this silo
// lists). The cached part is shared: it is copied, never changed.
func trimmed(p *dpb.SnapshotReply, in *dpb.SnapshotRequest) *dpb.SnapshotReply {
	n := int(in.GetHottest())
	if p.Keys == nil || n == 0 || len(p.Keys.Hottest) <= n {
		return p
	}
	return &dpb.SnapshotReply{
		Silo: p.Silo, Generation: p.Generation, BuiltUnixNano: p.BuiltUnixNano,
		Activations: p.Activations, Calls: p.Calls, Limiters: p.Limiters,
		Keys: &dpb.KeyTable{Active: p.Keys.Active, Asked: p.Keys.Asked, Hottest: p.Keys.Hottest[:n]},
	}
}

func (d *Dashboard) startServing() bool {
	d.serving.Lock()
	defer d.serving.Unlock()
	if d.serving.closed || d.serving.inFlight >= maxServing {
		return false
	}
	d.serving.inFlight++
	d.serving.wg.Add(1)
	return true
}

func (d *Dashboard) doneServing() {
	d.serving.Lock()
	d.serving.inFlight--
	d.serving.Unlock()
	d.serving.wg.Done()
}
