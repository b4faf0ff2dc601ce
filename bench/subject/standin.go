package subject

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// Settings of the measured silos, as bench.md asks.
const (
	// HomeSilo is the name of the silo every measured grain lives on.
	HomeSilo = "silo-0"
	// FlushPeriod is the silos' snapshot period.
	FlushPeriod = 50 * time.Millisecond
)

var quiet = slog.New(slog.DiscardHandler)

// StandIn is the stand-in topology until the testcluster fixture exists:
// ONE silo (HomeSilo) on loopback TCP with the memory store and a 50 ms
// snapshot period, and a client connected through its gateway, the only
// one the client is given. Every grain lives on that silo, which
// SiloOf checks. Replace it with the two-silo topology of bench.md.
type StandIn struct {
	silo   *silo.Silo
	client *client.Client
}

var _ Topology = (*StandIn)(nil)

// NewStandIn returns the stand-in topology, not started.
func NewStandIn() *StandIn { return &StandIn{} }

// Describe says that this is the stand-in.
func (s *StandIn) Describe() string {
	return fmt.Sprintf("STAND-IN: one silo (%s) on loopback TCP, memory store, %v snapshot flush, "+
		"a client through its gateway (the only one, verified); placement on %s verified before and after each repetition",
		HomeSilo, FlushPeriod, HomeSilo)
}

// Start starts the silo with the rate-limiting grains and connects the
// client to its gateway.
func (s *StandIn) Start(ctx context.Context) error {
	sl, err := silo.New(silo.Options{Name: HomeSilo, GatewayAddress: "127.0.0.1:0", FlushPeriod: FlushPeriod}, silo.WithLogger(quiet))
	if err != nil {
		return err
	}
	if err := ratelimit.Register(sl, ratelimit.Defaults{}); err != nil {
		return err
	}
	if err := sl.Start(ctx); err != nil {
		return err
	}
	s.silo = sl
	gateway := sl.GatewayAddr().String()
	c, err := client.New(client.Options{Gateways: []string{gateway}}, client.WithLogger(quiet))
	if err != nil {
		return err
	}
	s.client = c
	if err := c.Connect(ctx); err != nil {
		return err
	}
	if got := c.Gateway(); got != gateway {
		return fmt.Errorf("subject: the client is connected to %q, not to %s's gateway %q", got, HomeSilo, gateway)
	}
	return nil
}

// Stop closes the client and stops the silo.
func (s *StandIn) Stop(ctx context.Context) error {
	var errs []error
	if s.client != nil {
		errs = append(errs, s.client.Close())
		s.client = nil
	}
	if s.silo != nil {
		errs = append(errs, s.silo.Stop(ctx))
		s.silo = nil
	}
	return errors.Join(errs...)
}

// Caller returns the client.
func (s *StandIn) Caller() proxy.Caller { return s.client }

// Home returns HomeSilo.
func (s *StandIn) Home() string { return HomeSilo }

// Place activates the grain: with one silo there is nowhere else for it
// to go, so no hint is needed.
func (s *StandIn) Place(ctx context.Context, _ actor.GrainID, activate func(context.Context) error) error {
	return activate(ctx)
}

// SiloOf returns HomeSilo when the silo hosts id's activation.
func (s *StandIn) SiloOf(_ context.Context, id actor.GrainID) (string, error) {
	if s.silo.Host().IsActive(id) {
		return s.silo.Name(), nil
	}
	return "", nil
}
