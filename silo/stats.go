package silo

import (
	"github.com/granary-go/granary/internal/directory"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/persistence"
)

// Stats are a silo's counters, for tests, health pages and metrics. They
// are copies: reading them again gives newer counters.
type Stats struct {
	Host    HostStats                // the activations
	Gateway ConnectionStats          // summed over client connections
	Clients int                      // client connections open
	Links   ConnectionStats          // summed over connections to other silos
	Flusher persistence.FlusherStats // the state writes
	// Directory counts this silo's part of the grain directory (a silo of
	// a cluster).
	Directory DirectoryStats
	// Calls counts the grain calls answered here, by grain type, method
	// and outcome.
	Calls []MethodCalls
	// ClosedGateway and ClosedLinks are the final counters of the client
	// connections and links that closed since Start: add them to Gateway
	// and Links for totals that never go back.
	ClosedGateway, ClosedLinks ConnectionStats
	// Rejected counts the requests and frames refused on every connection
	// since New, gateway and links, those closed since included.
	Rejected RejectionStats
	// GatewayListener counts the gateway's connections: those refused and
	// closed for the peer's behaviour (the handshake, the connection limit,
	// frames too large or too slow).
	GatewayListener ListenerStats
	// LinkListener counts the same for the listener of links from other
	// silos (a silo of a cluster).
	LinkListener ListenerStats
	// Fence counts what the minority fence did (a silo of a cluster).
	Fence FenceStats
}

// HostStats count the silo's activations and what ran in them.
type HostStats struct {
	Active             int   // activations alive now
	Activations        int64 // activations created
	Deactivations      int64 // activations deactivated
	ActivationFailures int64 // activations whose load or OnActivate failed
	Invocations        int64 // grain methods invoked
	SkippedCancelled   int64 // queued requests dropped because their caller cancelled
	Panics             int64 // grain methods, timers and callbacks that panicked
	TimersArmed        int64 // grain timers and deferred deadlines armed
	Deferred           int64 // replies deferred by grains
	RefusedActivations int64 // activations refused: the silo's bound, or a connection's budget
}

// MethodCalls count the calls answered for one method of one grain type,
// by outcome.
type MethodCalls struct {
	// Type is the grain type.
	Type string
	// Method is the method's name, or "" for the calls whose method the
	// type's contract does not list.
	Method string
	// OK counts the calls answered without an error (a rejected lease is a
	// value, so it counts here).
	OK uint64
	// Errors counts the calls answered with an error other than a
	// cancellation or a panic.
	Errors uint64
	// Cancelled counts the calls whose caller cancelled: dropped before
	// they ran, or answered with context.Canceled.
	Cancelled uint64
	// Panics counts the calls whose method panicked.
	Panics uint64
}

// ConnectionStats count what connections carried and refused: client
// connections on the gateway, or links to other silos.
type ConnectionStats struct {
	Pending       int   // outgoing calls waiting for replies
	CancelWatches int64 // outgoing calls that watched their context
	CancelsSent   int64 // cancels pushed to the callee
	Timeouts      int64 // outgoing calls failed by the response timeout
	InFlight      int64 // incoming requests not yet answered
	Overloaded    int64 // incoming requests refused: too many in flight
	Denied        int64 // incoming requests refused: a right the method needs is missing
	OverBudget    int64 // incoming requests refused: their new activation was over budget
	OverShare     int64 // incoming requests refused: their new activation was over the client's share
	BadRequests   int64 // incoming requests refused for contents that could not be read
	// Inbound counts the cancellable incoming calls.
	Inbound CancelStats
	// Transport counts the connections' traffic.
	Transport TrafficStats
}

// CancelStats count the incoming calls that their callers could cancel.
type CancelStats struct {
	Active       int   // calls registered and not done
	Early        int   // early cancels remembered now
	Registered   int64 // calls ever registered
	Cancelled    int64 // calls in progress that were cancelled
	EarlyCancels int64 // cancels that arrived for an unknown call
}

// TrafficStats count the frames and bytes of connections.
type TrafficStats struct {
	FramesQueued       uint64 // frames queued to send
	FramesWritten      uint64 // frames handed to the socket
	BatchesWritten     uint64 // socket writes; each carries every frame queued while the previous one ran
	BytesWritten       uint64 // bytes handed to the socket, length prefixes and heartbeats included
	FramesRead         uint64 // frames read
	BytesRead          uint64 // body bytes read
	HeartbeatsSent     uint64 // heartbeats queued for the peer
	HeartbeatsReceived uint64 // heartbeats that arrived
}

// RejectionStats count the requests and frames the silo's connections
// refused (docs/security.md).
type RejectionStats struct {
	Overloaded       int64  // requests refused: too many calls in flight on their connection, or more than its share
	OverShare        int64  // requests refused: their new activation was over the client's share
	OverBudget       int64  // requests refused: their new activation was over the connection's budget
	BadRequests      int64  // requests whose contents could not be read (key, payload, budget, call id)
	UnknownGrainType int64  // requests for a grain type the silo does not host
	UnknownMethod    int64  // requests for a method the grain type does not have
	MalformedFrames  int64  // frames that could not be parsed; each closed its connection
	UnknownKinds     int64  // frames of a kind this end does not know; each closed its connection
	PermissionDenied int64  // requests for a method that needs a right their connection's credential lacks
	LogSuppressed    uint64 // log lines about the above dropped by the throttle
}

// ListenerStats count a listener's connections: those it refused, and
// those it closed for the peer's behaviour (docs/security.md).
type ListenerStats struct {
	Open     int    // connections held now, handshaking ones included
	Accepted uint64 // connections that passed the handshake and were taken

	RefusedLimit uint64 // closed on arrival: the connection limit was reached
	// RefusedPerSource counts connections closed on arrival because their
	// source address held Limits.MaxConnectionsPerSource already.
	RefusedPerSource uint64
	RefusedByAccept  uint64 // passed the handshake, refused by the silo

	// Handshake failures, by reason.
	HandshakeVersion     uint64 // a protocol version this silo does not speak
	HandshakeCluster     uint64 // another cluster's id
	HandshakeSecret      uint64 // the cluster secret not proved
	HandshakeRole        uint64 // a client on the silos' listener, or a silo on the gateway
	HandshakeTLSMismatch uint64 // TLS on one end only
	HandshakeTLS         uint64 // the TLS handshake failed
	HandshakeTimeout     uint64 // not finished within Limits.HandshakeTimeout
	HandshakeAborted     uint64 // the peer went away during it
	HandshakeMalformed   uint64 // a handshake that could not be read
	HandshakeCredential  uint64 // a client credential missing or not proved

	// Established connections closed for the peer's behaviour.
	FrameTooLarge     uint64 // announced a frame above MaxFrameSize
	Truncated         uint64 // ended the stream inside a frame
	ReadTooSlow       uint64 // sent a frame slower than Limits.MinReadRate
	IdleClosed        uint64 // idle for Limits.IdleTimeout
	KeepaliveTimeouts uint64 // a link that sent nothing for Cluster.KeepaliveTimeout

	LogSuppressed uint64 // log lines about the above dropped by the throttle
}

// DirectoryStats count this silo's part of the grain directory.
type DirectoryStats struct {
	Partition        int   // entries this silo owns
	Cached           int   // locations in the cache
	Held             int   // ranges whose requests wait
	Mourning         int   // silos the view lost that are still in their DeathGrace
	Registrations    int64 // registrations this silo's partition decided
	Conflicts        int64 // duplicates found while merging handoffs and rebuilds
	Lookups          int64 // locations asked for
	RemoteLookups    int64 // of them, asked of another silo
	CacheHits        int64 // of them, answered by the cache
	HandoffsSent     int64 // ranges handed to their new owners
	HandoffsReceived int64 // ranges handed to this silo
	Rebuilds         int64 // ranges rebuilt after their owner died
	Dropped          int64 // entries dropped because their silo died
	// Asking counts the requests that ask a silo, round after round, what
	// it hosts or to deactivate a duplicate, until it answers or leaves.
	Asking int64
}

// Stats returns the silo's counters.
func (s *Silo) Stats() Stats { return s.stats().public() }

// partStats are the silo's counters as its parts keep them: what Stats
// converts and the metrics read.
type partStats struct {
	Host                       host.HostStats
	Gateway                    rpc.EndpointStats
	Clients                    int
	Links                      rpc.EndpointStats
	Flusher                    persistence.FlusherStats
	Directory                  directory.Stats
	Calls                      []host.MethodCalls
	ClosedGateway, ClosedLinks rpc.EndpointStats
	Rejected                   rpc.RejectionStats
	GatewayListener            transport.ListenerStats
	LinkListener               transport.ListenerStats
	Fence                      FenceStats
}

// public converts the parts' counters into the silo's own types. Where
// the fields are the same, a conversion does it, so that a counter added
// to a part fails to compile here until Stats has it too.
func (st partStats) public() Stats {
	out := Stats{
		Host:            HostStats(st.Host),
		Gateway:         connectionStats(st.Gateway),
		Clients:         st.Clients,
		Links:           connectionStats(st.Links),
		Flusher:         st.Flusher,
		Directory:       DirectoryStats(st.Directory),
		ClosedGateway:   connectionStats(st.ClosedGateway),
		ClosedLinks:     connectionStats(st.ClosedLinks),
		Rejected:        RejectionStats(st.Rejected),
		GatewayListener: ListenerStats(st.GatewayListener),
		LinkListener:    ListenerStats(st.LinkListener),
		Fence:           st.Fence,
	}
	if st.Calls != nil {
		out.Calls = make([]MethodCalls, len(st.Calls))
		for i, mc := range st.Calls {
			out.Calls[i] = MethodCalls{
				Type: mc.Type, Method: mc.Method,
				OK:        mc.Calls[host.OutcomeOK],
				Errors:    mc.Calls[host.OutcomeError],
				Cancelled: mc.Calls[host.OutcomeCancelled],
				Panics:    mc.Calls[host.OutcomePanic],
			}
		}
	}
	return out
}

// MethodCalls names the four outcomes a call can have: one more must be
// counted there too.
var _ [0]struct{} = [host.NumOutcomes - 4]struct{}{}

// connectionStats converts an endpoint's counters.
func connectionStats(st rpc.EndpointStats) ConnectionStats {
	return ConnectionStats{
		Pending: st.Pending, CancelWatches: st.CancelWatches, CancelsSent: st.CancelsSent,
		Timeouts: st.Timeouts, InFlight: st.InFlight, Overloaded: st.Overloaded, Denied: st.Denied,
		OverBudget: st.OverBudget, OverShare: st.OverShare, BadRequests: st.BadRequests,
		Inbound:   CancelStats(st.Inbound),
		Transport: TrafficStats(st.Transport),
	}
}
