package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/bench"
)

// protoKind is the bare grain's kind, hosted by the second member only.
const protoKind = "bench-echo"

// protoTimeout bounds one grain request.
const protoTimeout = 10 * time.Second

// ProtoActor is protoactor-go's own cluster, what a Go user picks for
// virtual actors today: two members in process with remoting on loopback
// and an in-memory membership provider. The second member hosts a bare
// grain that answers each request with its own message; the first calls
// it, so every request crosses loopback gRPC between the members.
type ProtoActor struct {
	caller, host *cluster.Cluster
	payload      *wrapperspb.BytesValue
}

var _ bench.System = (*ProtoActor)(nil)

// NewProtoActor returns the protoactor-go peer, not started.
func NewProtoActor() *ProtoActor {
	return &ProtoActor{payload: wrapperspb.Bytes(make([]byte, echoPayload))}
}

// Name returns "protoactor".
func (p *ProtoActor) Name() string { return "protoactor" }

// Topology describes protoactor-go's path.
func (p *ProtoActor) Topology() string {
	return "protoactor-go cluster, two members in process over loopback gRPC, test provider, disthash; " +
		"a bare grain on member 1 called from member 0, placement verified"
}

// Cases returns the sequential, hot-key and partitioned scenarios without
// a context: cluster requests take a timeout, not a context.
func (p *ProtoActor) Cases(m bench.Matrix) []bench.Case {
	return m.PeerCases(bench.NoAlgorithm, false, bench.Sequential, bench.HotKey, bench.Partitioned)
}

// Start starts the hosting member, then the calling one, and waits until
// the caller sees the host's kind. In a binary built with the race
// detector it fails with bench.ErrUnavailable: protoactor-go's remoting
// sets gRPC's global logger at every member's start, while the first
// member's server goroutine reads it, and the detector stops the run.
func (p *ProtoActor) Start(ctx context.Context) error {
	if raceDetector {
		return fmt.Errorf("%w: protoactor-go's second member races on gRPC's global logger under the race detector", bench.ErrUnavailable)
	}
	agent := test.NewInMemAgent()
	grain := actor.PropsFromFunc(func(c actor.Context) {
		if m, ok := c.Message().(*wrapperspb.BytesValue); ok {
			c.Respond(m)
		}
	})
	p.host = newProtoMember(agent, cluster.NewKind(protoKind, grain))
	p.host.StartMember()
	p.caller = newProtoMember(agent)
	p.caller.StartMember()
	return p.awaitHost(ctx)
}

func newProtoMember(agent *test.InMemAgent, kinds ...*cluster.Kind) *cluster.Cluster {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	config := cluster.Configure("granary-bench", test.NewTestProvider(agent), disthash.New(),
		remote.Configure("127.0.0.1", 0), cluster.WithKinds(kinds...), cluster.WithRequestTimeout(protoTimeout))
	return cluster.New(system, config)
}

// awaitHost polls until a grain request from the caller succeeds.
func (p *ProtoActor) awaitHost(ctx context.Context) error {
	err := poll(ctx, protoTimeout, func(context.Context) error { return p.request("warm-up") })
	if err != nil {
		return fmt.Errorf("peer: protoactor member 1 never answered: %w", err)
	}
	return nil
}

func (p *ProtoActor) request(identity string) error {
	reply, err := p.caller.Request(identity, protoKind, p.payload, cluster.WithTimeout(protoTimeout), cluster.WithRetryCount(1))
	if err != nil {
		return err
	}
	m, ok := reply.(*wrapperspb.BytesValue)
	if !ok || !proto.Equal(m, p.payload) {
		return fmt.Errorf("peer: the protoactor grain answered %T %v", reply, reply)
	}
	return nil
}

// Prepare returns the case's workload: one grain identity per key, of the
// case's own.
func (p *ProtoActor) Prepare(_ context.Context, c bench.Case) (bench.Workload, error) {
	ids := make([]string, c.Scenario.Keys())
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", c, i)
	}
	return &protoWorkload{p: p, ids: ids}, nil
}

// Stop shuts both members down gracefully, at once: a member stopped
// otherwise leaves its gossip loops and its gRPC connections' goroutines
// running.
func (p *ProtoActor) Stop(context.Context) error {
	var wg sync.WaitGroup
	for _, c := range []*cluster.Cluster{p.caller, p.host} {
		if c != nil {
			wg.Go(func() { c.Shutdown(true) })
		}
	}
	wg.Wait()
	p.caller, p.host = nil, nil
	return nil
}

// ProtoActorLeftovers names the functions of the goroutines protoactor-go
// leaves running for good once its members have stopped gracefully (its
// throttles' loops, and the test provider's TTL loop on a stopped ticker),
// so that leak checks can ignore them.
var ProtoActorLeftovers = []string{
	"github.com/asynkron/protoactor-go/cluster.NewGossipActor.NewThrottleWithLogger.func2.1",
	"github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1",
	"github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1",
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test.(*Provider).startTtlReport.func1",
}

type protoWorkload struct {
	p   *ProtoActor
	ids []string
}

func (w *protoWorkload) Do(_ context.Context, worker int) error {
	return w.p.request(w.ids[worker%len(w.ids)])
}

// CheckPlacement checks that every grain of the case lives on the hosting
// member.
func (w *protoWorkload) CheckPlacement(context.Context) (bool, error) {
	var errs []error
	for _, id := range w.ids {
		pid := w.p.caller.Get(id, protoKind)
		if pid == nil || pid.Address != w.p.host.ActorSystem.Address() {
			errs = append(errs, fmt.Errorf("peer: protoactor grain %s is at %v, not on member 1 (%s)", id, pid, w.p.host.ActorSystem.Address()))
		}
	}
	return true, errors.Join(errs...)
}

func (w *protoWorkload) Close(context.Context) error { return nil }
