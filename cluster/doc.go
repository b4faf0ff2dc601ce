// Package cluster is the membership of a granary cluster: which silos are
// live, what each announces about itself, and the events when that changes.
// The grain directory, silo-to-silo links and routing build on it.
//
// # Membership
//
// Each silo runs a Membership over hashicorp/memberlist (SWIM gossip with
// failure detection). New takes Options and does no I/O; Start binds the
// gossip port and joins through seed addresses, retrying until one answers
// or the context ends; Stop leaves gracefully; Kill dies as a crash would,
// for tests.
//
// Seeds may be DNS names: host:port for a name's A and AAAA records, or
// SRVSeedPrefix and an SRV name (a Kubernetes headless Service's). Names
// are resolved again at every round of dialling, while joining and every
// Timings.RejoinInterval after, so a silo whose seeds all restarted at new
// addresses finds them; WithResolver chooses the DNS server.
//
// A silo announces, in memberlist's node metadata: its id (the node name),
// its generation (start time, so a restart under the same id is a new
// incarnation), its silo-to-silo transport address, its gateway address or
// none, its Status, and a load figure (its activation count) for placement.
// Status changes are published at once, load changes at most once per
// Timings.MetaUpdateInterval. Metadata arrives from the network and is
// decoded defensively: a member whose metadata cannot be read is left out of
// the view, with a log line.
//
// # The view and its events
//
// The local View lists every visible member, this silo included, with a
// Version that grows by one with every change; each member's Since says
// when the view began to show it in its status. Subscribe returns the View
// and a Subscription carrying every later Event: joined, updated, left (the
// member announced its leave to this silo first) or failed (anything else:
// a crash, a kill, a death declared by the failure detector, a newer
// incarnation under the same id). Events are queued without blocking
// memberlist, so a slow subscriber never stalls gossip.
//
// Different silos' views converge but are not synchronised: two silos can
// briefly disagree on who is live, for up to the failure detection time
// (docs/cluster.md gives the formula).
//
// # Reachability
//
// memberlist keeps to itself whether it suspects a member, and declares a
// silo dead only after the suspicion timeout. Reachability says sooner
// whether this silo reaches each member of its view: the membership sends
// every member (and itself) a probe packet once per Timings.ProbeInterval,
// through memberlist's transport, and a member that leaves ProbeMisses
// rounds unanswered is unreachable. ReachabilityChanged signals changes.
// The silo's minority fence is fed from it.
//
// # Security
//
// Options.ClusterID travels as memberlist's label on every packet and
// stream; a silo drops whatever carries another. Options.Secret, when set,
// encrypts and authenticates all gossip with AES-256-GCM under a key derived
// from it with HKDF-SHA256. A silo with another cluster id or secret never
// joins: its Start fails with ErrJoin.
//
// memberlist logs through the injected slog.Logger, never to stderr.
//
// # Goroutines
//
// A Membership owns two goroutines (the metadata publisher and the
// prober), started by Start and joined by Stop and Kill. memberlist's Shutdown joins its
// listeners; its scheduler and connection goroutines end on their own
// within a probe interval or TCPTimeout after it.
package cluster
