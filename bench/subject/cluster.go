package subject

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/grains/ratelimit"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// Cluster is the topology of bench.md: two silos in one process over
// loopback TCP (the testcluster fixture), the memory store, a 50 ms
// snapshot period, only silo 0 (HomeSilo) a gateway, and every measured
// grain placed on silo 0 with a placement hint on the call that activates
// it, which no later call carries.
type Cluster struct {
	tb      *programTB
	cluster *testcluster.Cluster
	client  *client.Client
}

var _ Topology = (*Cluster)(nil)

// operatorToken is the benchmark client's credential. It holds the admin
// right because the holders bind their options, which configures each
// limiter on first use: a change that the gateway allows only an admin.
var operatorToken = client.Token{Name: "bench", Secret: []byte("the benchmark's operator token..")}

// NewCluster returns the two-silo topology, not started.
func NewCluster() *Cluster { return &Cluster{} }

// Describe says what the topology is.
func (c *Cluster) Describe() string {
	return fmt.Sprintf("two silos in one process over loopback TCP (testcluster), memory store, %v snapshot flush, "+
		"only %s a gateway (verified in the client's gateway list); every grain placed on %s with a hint, "+
		"the hint removed before warm-up, placement verified before and after each repetition", FlushPeriod, HomeSilo, HomeSilo)
}

// Start starts the two silos and connects the client to silo 0's gateway.
func (c *Cluster) Start(ctx context.Context) (err error) {
	c.tb = &programTB{}
	defer func() {
		if r := recover(); r != nil {
			if f, ok := r.(fatal); ok {
				err = f.err
				c.tb.cleanup()
				return
			}
			panic(r)
		}
	}()
	c.cluster = testcluster.New(c.tb, testcluster.Options{
		Silos: 2, OnlyFirstGateway: true,
		Register: func(s *silo.Silo) error { return ratelimit.Register(s, ratelimit.Defaults{}) },
		Configure: func(_ int, o *silo.Options) {
			o.FlushPeriod = FlushPeriod
			o.Security.ClientTokens = []silo.ClientToken{{Name: operatorToken.Name, Secret: operatorToken.Secret, Rights: actor.RightAdmin}}
		},
		Logger: quiet,
	})
	gateways := c.cluster.Gateways()
	home := c.cluster.Silo(0).GatewayAddr().String()
	if len(gateways) != 1 || gateways[0] != home {
		return fmt.Errorf("subject: the gateways are %v, not %s's alone", gateways, HomeSilo)
	}
	c.client = c.cluster.NewClient(client.Options{Token: &operatorToken})
	if err := c.client.Connect(ctx); err != nil {
		return err
	}
	if got := c.client.Gateway(); got != home {
		return fmt.Errorf("subject: the client is connected to %q, not to %s's gateway %q", got, HomeSilo, home)
	}
	return nil
}

// Stop stops both silos; safe to call twice.
func (c *Cluster) Stop(context.Context) error {
	if c.tb == nil {
		return nil
	}
	c.tb.cleanup()
	errs := c.tb.errs
	c.tb, c.cluster, c.client = nil, nil, nil
	return errors.Join(errs...)
}

// Caller returns the client of silo 0's gateway.
func (c *Cluster) Caller() proxy.Caller { return c.client }

// Home returns HomeSilo.
func (c *Cluster) Home() string { return HomeSilo }

// statistics is the method that activates a limiter grain without taking
// permits, by grain type.
var statistics = map[string]*proxy.MethodDesc{
	pb.ConcurrencyLimiterGrainType:   pb.ConcurrencyLimiter_Statistics_Method,
	pb.FixedWindowLimiterGrainType:   pb.FixedWindowLimiter_Statistics_Method,
	pb.SlidingWindowLimiterGrainType: pb.SlidingWindowLimiter_Statistics_Method,
	pb.TokenBucketLimiterGrainType:   pb.TokenBucketLimiter_Statistics_Method,
}

// Place activates the grain on silo 0 with a call that carries the
// placement hint (its statistics, which take no permits); no later call
// carries one. Other grain types are activated by activate, unhinted.
func (c *Cluster) Place(ctx context.Context, id actor.GrainID, activate func(context.Context) error) error {
	m := statistics[id.Type]
	if m == nil {
		return activate(ctx)
	}
	return proxy.NewRef(c.client, id.Type, id.Key).Invoke(ctx, m, &pb.StatisticsRequest{}, &pb.StatisticsReply{}, c.cluster.PlaceOn(0))
}

// SiloOf returns the silo the directory says hosts id's activation, having
// checked that this silo's host has it.
func (c *Cluster) SiloOf(ctx context.Context, id actor.GrainID) (string, error) {
	where, found, err := c.cluster.Locate(ctx, id)
	if err != nil || !found {
		return "", err
	}
	if n := c.cluster.Activations(id); n != 1 {
		return "", fmt.Errorf("subject: %s has %d activations", id, n)
	}
	return where, nil
}

// programTB lets a program use the test kit: a fatal error unwinds to
// Start, which returns it, and cleanups run at Stop.
type programTB struct {
	mu       sync.Mutex
	cleanups []func()
	errs     []error
}

type fatal struct{ err error }

func (p *programTB) Helper() {}

func (p *programTB) Errorf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

func (p *programTB) Fatalf(format string, args ...any) { panic(fatal{fmt.Errorf(format, args...)}) }

func (p *programTB) Cleanup(fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, fn)
}

// cleanup runs the cleanups, the last registered first, as testing does.
func (p *programTB) cleanup() {
	p.mu.Lock()
	fns := p.cleanups
	p.cleanups = nil
	p.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}
