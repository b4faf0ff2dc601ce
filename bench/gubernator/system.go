package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	guber "github.com/gubernator-io/gubernator/v2"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/granary-go/granary/bench"
)

// nodes is the size of the gubernator cluster.
const nodes = 2

// system is gubernator as a bench.System: two daemons in process on
// loopback, peers of each other, and a gRPC client of daemon 0.
type system struct {
	daemons []*guber.Daemon
	conn    *grpc.ClientConn
	client  guber.V1Client
}

var _ bench.System = (*system)(nil)

func newSystem() *system { return &system{} }

func (s *system) Name() string { return "gubernator" }

func (s *system) Topology() string {
	return "gubernator v2.13.0, two nodes in process over loopback gRPC, a client of node 0; " +
		"TOKEN_BUCKET, keys owned by node 0, ownership verified"
}

// Cases returns the sequential, hot-key and partitioned scenarios under
// both overloads: GetRateLimits takes the caller's context.
func (s *system) Cases(m bench.Matrix) []bench.Case {
	return m.PeerCases(bench.TokenBucket, true, bench.Sequential, bench.HotKey, bench.Partitioned)
}

// Start spawns the daemons on free loopback ports, tells each of the
// other, and connects the client to daemon 0.
func (s *system) Start(ctx context.Context) error {
	log := logrus.New()
	log.SetOutput(io.Discard)
	var peers []guber.PeerInfo
	for i := range nodes {
		grpcAddr, httpAddr := freeAddr(), freeAddr()
		if grpcAddr == "" || httpAddr == "" {
			return errors.New("gubernator: no free loopback port")
		}
		d, err := guber.SpawnDaemon(ctx, guber.DaemonConfig{
			InstanceID:        "node-" + strconv.Itoa(i),
			GRPCListenAddress: grpcAddr,
			HTTPListenAddress: httpAddr,
			AdvertiseAddress:  grpcAddr,
			Logger:            log.WithField("node", i),
			Behaviors: guber.BehaviorConfig{
				GlobalSyncWait: 50 * time.Millisecond,
				GlobalTimeout:  5 * time.Second,
				BatchTimeout:   5 * time.Second,
			},
		})
		if d != nil {
			s.daemons = append(s.daemons, d)
		}
		if err != nil {
			return fmt.Errorf("gubernator: node %d: %w", i, err)
		}
		d.PeerInfo = guber.PeerInfo{GRPCAddress: grpcAddr, HTTPAddress: httpAddr}
		peers = append(peers, d.PeerInfo)
	}
	for _, d := range s.daemons {
		d.SetPeers(peers)
	}
	conn, err := grpc.NewClient(peers[0].GRPCAddress, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	s.conn, s.client = conn, guber.NewV1Client(conn)
	return nil
}

// freeAddr returns a loopback address whose port was free a moment ago:
// a node must know its own address before it listens, to recognise itself
// among its peers.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}

func (s *system) Stop(context.Context) error {
	var err error
	if s.conn != nil {
		err = s.conn.Close()
		s.conn, s.client = nil, nil
	}
	for _, d := range s.daemons {
		d.Close()
	}
	s.daemons = nil
	return err
}

// Prepare picks the case's keys among names owned by daemon 0.
func (s *system) Prepare(ctx context.Context, c bench.Case) (bench.Workload, error) {
	w := &workload{s: s}
	for i := 0; len(w.requests) < c.Scenario.Keys(); i++ {
		req := &guber.RateLimitReq{
			Name:      "bench",
			UniqueKey: fmt.Sprintf("%s/%d", c, i),
			Hits:      1,
			Limit:     bench.Quota,
			Duration:  bench.Window.Milliseconds(),
			Algorithm: guber.Algorithm_TOKEN_BUCKET,
		}
		home, err := s.ownedByNode0(ctx, req)
		if err != nil {
			return nil, err
		}
		if home {
			w.requests = append(w.requests, &guber.GetRateLimitsReq{Requests: []*guber.RateLimitReq{req}})
		}
	}
	return w, nil
}

// ownedByNode0 reports whether daemon 0 owns the request's key.
func (s *system) ownedByNode0(ctx context.Context, req *guber.RateLimitReq) (bool, error) {
	p, err := s.daemons[0].V1Server.GetPeer(ctx, req.HashKey())
	if err != nil {
		return false, err
	}
	return p.Info().GRPCAddress == s.daemons[0].PeerInfo.GRPCAddress, nil
}

type workload struct {
	s        *system
	requests []*guber.GetRateLimitsReq // one per key, shared by its workers: only read
}

func (w *workload) Do(ctx context.Context, worker int) error {
	resp, err := w.s.client.GetRateLimits(ctx, w.requests[worker%len(w.requests)])
	if err != nil {
		return err
	}
	if len(resp.Responses) != 1 {
		return fmt.Errorf("gubernator: %d responses for one request", len(resp.Responses))
	}
	r := resp.Responses[0]
	if r.Error != "" {
		return fmt.Errorf("gubernator: %s", r.Error)
	}
	if r.Status != guber.Status_UNDER_LIMIT {
		return fmt.Errorf("%w: %s, %d remaining", bench.ErrNotGranted, r.Status, r.Remaining)
	}
	return nil
}

func (w *workload) CheckPlacement(ctx context.Context) (bool, error) {
	var errs []error
	for _, r := range w.requests {
		home, err := w.s.ownedByNode0(ctx, r.Requests[0])
		if err == nil && !home {
			err = fmt.Errorf("gubernator: key %s moved off node 0", r.Requests[0].HashKey())
		}
		errs = append(errs, err)
	}
	return true, errors.Join(errs...)
}

func (w *workload) Close(context.Context) error { return nil }
