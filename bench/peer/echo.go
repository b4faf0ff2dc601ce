package peer

import (
	"bytes"
	"context"
	"fmt"

	"github.com/granary-go/granary/bench"
	"github.com/granary-go/granary/internal/echo"
	"github.com/granary-go/granary/internal/transport"
)

// echoPayload is the size of an echo request's payload, about what an
// acquisition's request takes on the wire.
const echoPayload = 48

// Echo is the transport ceiling: a bare length-prefixed request/response
// echo over one loopback TCP connection, on the same framed transport as
// granary's silos and clients.
type Echo struct {
	server  *echo.Server
	client  *echo.Client
	payload []byte
}

var _ bench.System = (*Echo)(nil)

// NewEcho returns the echo peer, not started.
func NewEcho() *Echo { return &Echo{payload: bytes.Repeat([]byte("p"), echoPayload)} }

// Name returns "transport-echo".
func (e *Echo) Name() string { return "transport-echo" }

// Topology describes the echo's path.
func (e *Echo) Topology() string {
	return fmt.Sprintf("bare length-prefixed echo over one loopback TCP connection, %d-byte payloads, answered on the server's reader", echoPayload)
}

// Cases returns the sequential, hot-key and partitioned scenarios without
// a context: the echo has no keys (partitioned is hot-key's load) and its
// calls take no context.
func (e *Echo) Cases(m bench.Matrix) []bench.Case {
	return m.PeerCases(bench.NoAlgorithm, false, bench.Sequential, bench.HotKey, bench.Partitioned)
}

// Start starts the server and connects the client.
func (e *Echo) Start(ctx context.Context) error {
	s, err := echo.Listen("127.0.0.1:0", transport.Options{})
	if err != nil {
		return err
	}
	e.server = s
	e.client, err = echo.Dial(ctx, s.Addr().String(), transport.Options{})
	return err
}

// Prepare returns the echo's workload: every case calls the one client.
func (e *Echo) Prepare(context.Context, bench.Case) (bench.Workload, error) {
	return echoWorkload{e: e}, nil
}

// Stop closes the client and the server.
func (e *Echo) Stop(context.Context) error {
	var err error
	if e.client != nil {
		err = e.client.Close()
		e.client = nil
	}
	if e.server != nil {
		if cerr := e.server.Close(); err == nil {
			err = cerr
		}
		e.server = nil
	}
	return err
}

type echoWorkload struct {
	unplaced
	e *Echo
}

func (w echoWorkload) Do(context.Context, int) error {
	reply, err := w.e.client.Call(w.e.payload)
	if err != nil {
		return err
	}
	if len(reply) != len(w.e.payload) {
		return fmt.Errorf("peer: echo answered %d bytes for %d", len(reply), len(w.e.payload))
	}
	return nil
}
