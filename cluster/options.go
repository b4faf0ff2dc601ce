package cluster

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/granary-go/granary/clock"
)

// Defaults of Options.
const (
	// DefaultBindAddress is where memberlist listens (UDP and TCP on the same
	// port): loopback only, unless you say otherwise.
	DefaultBindAddress = "127.0.0.1:7946"
	// DefaultClusterID names the cluster when Options.ClusterID is empty.
	DefaultClusterID = "granary"
)

// Limits that Validate enforces.
const (
	// MaxClusterIDLength bounds Options.ClusterID: memberlist's label, which
	// carries it, holds at most 255 bytes.
	MaxClusterIDLength = memberlist.LabelMaxSize - len(labelPrefix)
	// MinSecretLength is the shortest cluster secret accepted.
	MinSecretLength = 16
)

// labelPrefix starts memberlist's label; the cluster id follows.
const labelPrefix = "granary/"

// ErrInvalidOptions is wrapped by every problem Options.Validate reports.
var ErrInvalidOptions = errors.New("cluster: invalid options")

// Options are a silo's membership settings. The zero value of a field means
// its default; New calls EnsureDefaults and Validate.
type Options struct {
	// SiloID identifies the silo in the cluster; it is memberlist's node name
	// and must be unique among live silos. At most MaxSiloIDLength bytes of
	// printable UTF-8 without spaces. Required: the silo host names itself.
	SiloID string
	// Generation tells this incarnation of SiloID from earlier ones. Default:
	// the clock's time at New, in Unix nanoseconds.
	Generation int64
	// Address is the silo's silo-to-silo transport address as peers should
	// dial it, host:port with a port from 1. Required.
	Address string
	// Gateway is the address clients should dial, or "" when the silo is not
	// a gateway.
	Gateway string

	// BindAddress is where memberlist listens for gossip, IP:port; port 0
	// picks a free port (see Membership.GossipAddress). Default
	// DefaultBindAddress.
	BindAddress string
	// AdvertiseAddress is the IP:port other silos should gossip to, when it
	// differs from BindAddress (NAT, or binding 0.0.0.0). Default: derived by
	// memberlist from BindAddress.
	AdvertiseAddress string
	// Seeds are gossip addresses of silos to join: host:port, where the
	// host is an IP or a DNS name (all its A and AAAA records), or
	// SRVSeedPrefix and an SRV name. Names are resolved again at every
	// round of dialling, so a seed follows its DNS answers while the silo
	// runs. Give every silo the same list, itself included: a seed that is
	// this silo is skipped, and Start waits until another seed answers
	// (a name that resolves to nothing yet counts as one that does not
	// answer), so a silo that restarts rejoins its cluster instead of
	// forming one of its own. Only a silo whose seeds all resolve to
	// itself (or none) starts a new cluster; see Bootstrap for the
	// exception. Once joined, the silo keeps dialling the seeds' addresses
	// no live member gossips at, every Timings.RejoinInterval.
	Seeds []string
	// Bootstrap lets Start form a new cluster when no other seed answers
	// its first round of dialling, instead of waiting for one: the way to
	// rebuild a cluster whose other silos are gone for good (etcd's
	// --initial-cluster-state new). Dangerous to leave on: a bootstrapping
	// silo that restarts while its peers are unreachable (down, restarting
	// or cut off) forms a second cluster beside theirs, and a grain may
	// then run twice until the rejoin loop merges the two. Default false.
	Bootstrap bool

	// ClusterID keeps clusters apart: it travels as memberlist's label on
	// every packet and stream, and silos drop what carries another. At most
	// MaxClusterIDLength bytes. Default DefaultClusterID.
	ClusterID string
	// Secret, when set, encrypts and authenticates all gossip with AES-256-GCM
	// under a key derived from it (HKDF-SHA256, bound to the cluster id); a
	// silo without it, or with another, cannot join. At least
	// MinSecretLength bytes. Default none: gossip travels in clear.
	Secret []byte

	// Timings tune memberlist and the membership layer. Zero fields take
	// LANTimings' values; FastTimings is a profile for tests.
	Timings Timings
}

// Timings are the knobs of failure detection, gossip and membership
// updates. docs/cluster.md explains how they set the failure detection time.
type Timings struct {
	// ProbeInterval is how often a silo probes one other silo (memberlist
	// ProbeInterval). Shorter detects failures sooner and costs more packets.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a probe waits for an ack before asking others
	// to probe indirectly; about the network's 99th percentile round trip.
	ProbeTimeout time.Duration
	// IndirectChecks is how many silos are asked to probe a silo that missed
	// a direct probe. More resists false suspicions from a lossy path.
	IndirectChecks int
	// SuspicionMult scales how long a suspected silo has to refute before it
	// is declared dead: SuspicionMult * max(1, log10(n)) * ProbeInterval.
	SuspicionMult int
	// SuspicionMaxTimeoutMult bounds the suspicion time when confirmations
	// from other silos are missing: SuspicionMaxTimeoutMult times the above.
	SuspicionMaxTimeoutMult int
	// AwarenessMaxMultiplier bounds how far a silo that notices it is slow
	// (missed acks, late probes) stretches its own probe interval and
	// timeout, so that a sick prober accuses nobody.
	AwarenessMaxMultiplier int
	// GossipInterval is how often queued broadcasts are gossiped to
	// GossipNodes random silos. Shorter propagates joins, leaves and
	// metadata faster.
	GossipInterval time.Duration
	// GossipNodes is how many silos each gossip round reaches.
	GossipNodes int
	// GossipToTheDeadTime is how long a dead silo is still gossiped to, so
	// that it can refute a false death.
	GossipToTheDeadTime time.Duration
	// RetransmitMult scales how often a broadcast is retransmitted:
	// RetransmitMult * ceil(log10(n+1)) times.
	RetransmitMult int
	// PushPullInterval is how often a silo syncs its whole state with a
	// random other silo over TCP; it repairs what gossip lost.
	PushPullInterval time.Duration
	// TCPTimeout bounds dialling and each read and write of memberlist's TCP
	// streams (joins, push-pull, fallback probes, leave notices).
	TCPTimeout time.Duration
	// DeadNodeReclaimTime is how long after a silo was declared dead its id
	// may be reused from another address (a restarted pod with a new IP).
	DeadNodeReclaimTime time.Duration

	// JoinRetryInterval is the pause between two rounds of dialling the
	// seeds while Start waits for the first one to answer.
	JoinRetryInterval time.Duration
	// MetaUpdateInterval is the shortest time between two load
	// publications; status changes go out at once.
	MetaUpdateInterval time.Duration
	// LeaveTimeout bounds each of the two waits of a graceful Stop: for
	// every member to confirm it saw the leave notice, and for the leave to
	// be broadcast. Stop's context can shorten both.
	LeaveTimeout time.Duration
	// RejoinInterval is how often a joined silo dials (memberlist Join) the
	// seeds and the members it saw fail whose addresses no live member
	// gossips at. memberlist never contacts a member again once it stopped
	// gossiping to the dead (GossipToTheDeadTime), so without these dials
	// the two sides of a healed partition stay two clusters. After a heal,
	// the sides become one view within about two RejoinIntervals and a few
	// gossip rounds (docs/cluster.md).
	RejoinInterval time.Duration
	// RejoinWindow is how long after a member failed the silo still dials
	// its gossip address, so that a silo gone for good is not dialled for
	// ever; at most 64 failed members are remembered. Seeds are dialled for
	// as long as they are not in the view. At least RejoinInterval.
	RejoinWindow time.Duration
}

// LANTimings returns the default timings: memberlist's DefaultLANConfig
// values, and load publications at most once a second. A crashed silo is
// declared dead after about 6 s in a cluster of 4 (docs/cluster.md).
func LANTimings() Timings {
	c := memberlist.DefaultLANConfig()
	return Timings{
		ProbeInterval:           c.ProbeInterval,
		ProbeTimeout:            c.ProbeTimeout,
		IndirectChecks:          c.IndirectChecks,
		SuspicionMult:           c.SuspicionMult,
		SuspicionMaxTimeoutMult: c.SuspicionMaxTimeoutMult,
		AwarenessMaxMultiplier:  c.AwarenessMaxMultiplier,
		GossipInterval:          c.GossipInterval,
		GossipNodes:             c.GossipNodes,
		GossipToTheDeadTime:     c.GossipToTheDeadTime,
		RetransmitMult:          c.RetransmitMult,
		PushPullInterval:        c.PushPullInterval,
		TCPTimeout:              c.TCPTimeout,
		DeadNodeReclaimTime:     30 * time.Second,
		JoinRetryInterval:       time.Second,
		MetaUpdateInterval:      time.Second,
		LeaveTimeout:            5 * time.Second,
		RejoinInterval:          2 * time.Second,
		RejoinWindow:            10 * time.Minute,
	}
}

// FastTimings returns a profile for tests and the in-process test cluster
// on loopback: probes every 50 ms, gossip every 10 ms, so that joins
// converge in tens of milliseconds and a killed silo is declared dead in
// about 0.3 s. It assumes round trips far below 25 ms; do not use it across
// real networks.
func FastTimings() Timings {
	return Timings{
		ProbeInterval:           50 * time.Millisecond,
		ProbeTimeout:            25 * time.Millisecond,
		IndirectChecks:          2,
		SuspicionMult:           4,
		SuspicionMaxTimeoutMult: 3,
		AwarenessMaxMultiplier:  4,
		GossipInterval:          10 * time.Millisecond,
		GossipNodes:             3,
		GossipToTheDeadTime:     500 * time.Millisecond,
		RetransmitMult:          3,
		PushPullInterval:        500 * time.Millisecond,
		TCPTimeout:              500 * time.Millisecond,
		DeadNodeReclaimTime:     500 * time.Millisecond,
		JoinRetryInterval:       20 * time.Millisecond,
		MetaUpdateInterval:      20 * time.Millisecond,
		LeaveTimeout:            500 * time.Millisecond,
		RejoinInterval:          100 * time.Millisecond,
		RejoinWindow:            time.Minute,
	}
}

// EnsureDefaults replaces every zero field with its default.
func (o *Options) EnsureDefaults() {
	if o.BindAddress == "" {
		o.BindAddress = DefaultBindAddress
	}
	if o.ClusterID == "" {
		o.ClusterID = DefaultClusterID
	}
	o.Timings.ensureDefaults()
}

func (t *Timings) ensureDefaults() {
	lan := LANTimings()
	setDuration := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setDuration(&t.ProbeInterval, lan.ProbeInterval)
	setDuration(&t.ProbeTimeout, lan.ProbeTimeout)
	setInt(&t.IndirectChecks, lan.IndirectChecks)
	setInt(&t.SuspicionMult, lan.SuspicionMult)
	setInt(&t.SuspicionMaxTimeoutMult, lan.SuspicionMaxTimeoutMult)
	setInt(&t.AwarenessMaxMultiplier, lan.AwarenessMaxMultiplier)
	setDuration(&t.GossipInterval, lan.GossipInterval)
	setInt(&t.GossipNodes, lan.GossipNodes)
	setDuration(&t.GossipToTheDeadTime, lan.GossipToTheDeadTime)
	setInt(&t.RetransmitMult, lan.RetransmitMult)
	setDuration(&t.PushPullInterval, lan.PushPullInterval)
	setDuration(&t.TCPTimeout, lan.TCPTimeout)
	setDuration(&t.DeadNodeReclaimTime, lan.DeadNodeReclaimTime)
	setDuration(&t.JoinRetryInterval, lan.JoinRetryInterval)
	setDuration(&t.MetaUpdateInterval, lan.MetaUpdateInterval)
	setDuration(&t.LeaveTimeout, lan.LeaveTimeout)
	setDuration(&t.RejoinInterval, lan.RejoinInterval)
	setDuration(&t.RejoinWindow, lan.RejoinWindow)
}

// Validate reports every problem with o, each wrapping ErrInvalidOptions, or
// nil. Zero fields are problems: call EnsureDefaults first.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	if err := checkSiloID(o.SiloID); err != nil {
		bad("SiloID: %v", err)
	}
	if o.Generation < 0 {
		bad("Generation %d is negative", o.Generation)
	}
	if err := checkAddress(o.Address, 1); err != nil {
		bad("Address: %v", err)
	} else if len(o.Address) > maxAddressLength {
		bad("Address is longer than %d bytes", maxAddressLength)
	}
	if o.Gateway != "" {
		if err := checkAddress(o.Gateway, 1); err != nil {
			bad("Gateway: %v", err)
		} else if len(o.Gateway) > maxAddressLength {
			bad("Gateway is longer than %d bytes", maxAddressLength)
		}
	}
	if err := checkIPAddress(o.BindAddress, 0); err != nil {
		bad("BindAddress: %v", err)
	}
	if o.AdvertiseAddress != "" {
		if err := checkIPAddress(o.AdvertiseAddress, 1); err != nil {
			bad("AdvertiseAddress: %v", err)
		}
	}
	for i, s := range o.Seeds {
		if err := checkSeed(s); err != nil {
			bad("Seeds[%d]: %v", i, err)
		}
	}
	if o.ClusterID == "" || len(o.ClusterID) > MaxClusterIDLength {
		bad("ClusterID must be 1 to %d bytes, got %d", MaxClusterIDLength, len(o.ClusterID))
	}
	if len(o.Secret) > 0 && len(o.Secret) < MinSecretLength {
		bad("Secret must be at least %d bytes, got %d", MinSecretLength, len(o.Secret))
	}
	if n := maxMetaSize(o); n > memberlist.MetaMaxSize {
		bad("Address and Gateway take %d bytes of node metadata; memberlist carries at most %d", n, memberlist.MetaMaxSize)
	}
	errs = append(errs, o.Timings.validate()...)
	return errors.Join(errs...)
}

func (t *Timings) validate() []error {
	var errs []error
	positive := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%w: Timings.%s must be positive, got %v", ErrInvalidOptions, name, d))
		}
	}
	atLeastOne := func(name string, n int) {
		if n < 1 {
			errs = append(errs, fmt.Errorf("%w: Timings.%s must be at least 1, got %d", ErrInvalidOptions, name, n))
		}
	}
	positive("ProbeInterval", t.ProbeInterval)
	positive("ProbeTimeout", t.ProbeTimeout)
	if t.ProbeTimeout > 0 && t.ProbeInterval > 0 && t.ProbeTimeout >= t.ProbeInterval {
		errs = append(errs, fmt.Errorf("%w: Timings.ProbeTimeout %v must be shorter than ProbeInterval %v, which leaves the indirect probes their time", ErrInvalidOptions, t.ProbeTimeout, t.ProbeInterval))
	}
	atLeastOne("IndirectChecks", t.IndirectChecks)
	atLeastOne("SuspicionMult", t.SuspicionMult)
	atLeastOne("SuspicionMaxTimeoutMult", t.SuspicionMaxTimeoutMult)
	atLeastOne("AwarenessMaxMultiplier", t.AwarenessMaxMultiplier)
	positive("GossipInterval", t.GossipInterval)
	atLeastOne("GossipNodes", t.GossipNodes)
	positive("GossipToTheDeadTime", t.GossipToTheDeadTime)
	atLeastOne("RetransmitMult", t.RetransmitMult)
	positive("PushPullInterval", t.PushPullInterval)
	positive("TCPTimeout", t.TCPTimeout)
	positive("DeadNodeReclaimTime", t.DeadNodeReclaimTime)
	positive("JoinRetryInterval", t.JoinRetryInterval)
	positive("MetaUpdateInterval", t.MetaUpdateInterval)
	positive("LeaveTimeout", t.LeaveTimeout)
	positive("RejoinInterval", t.RejoinInterval)
	positive("RejoinWindow", t.RejoinWindow)
	if t.RejoinInterval > 0 && t.RejoinWindow > 0 && t.RejoinWindow < t.RejoinInterval {
		errs = append(errs, fmt.Errorf("%w: Timings.RejoinWindow %v is shorter than RejoinInterval %v: a failed member would never be dialled", ErrInvalidOptions, t.RejoinWindow, t.RejoinInterval))
	}
	return errs
}

// checkIPAddress accepts an IP literal and a port no lower than minPort:
// memberlist binds and advertises IPs, not names.
func checkIPAddress(addr string, minPort int) error {
	if err := checkAddress(addr, minPort); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(addr)
	if net.ParseIP(host) == nil {
		return fmt.Errorf("%q: the host must be an IP address", addr)
	}
	return nil
}

// String describes the options for a startup log line, without the secret.
func (o Options) String() string {
	secret := "none"
	if len(o.Secret) > 0 {
		secret = "set"
	}
	gateway := o.Gateway
	if gateway == "" {
		gateway = "none"
	}
	return fmt.Sprintf("silo=%s generation=%d address=%s gateway=%s bind=%s advertise=%q seeds=[%s] cluster=%s secret=%s %+v",
		o.SiloID, o.Generation, o.Address, gateway, o.BindAddress, o.AdvertiseAddress,
		strings.Join(o.Seeds, ","), o.ClusterID, secret, o.Timings)
}

// gossipKey derives memberlist's AES-256 key from the cluster secret. The
// key is bound to the cluster id and to its use here, so the same secret
// gives unrelated keys to another cluster and to the transport's handshake.
func gossipKey(secret []byte, clusterID string) []byte {
	key, err := hkdf.Key(sha256.New, secret, nil, "granary/memberlist-gossip/v1\x00"+clusterID, 32)
	if err != nil {
		panic(err) // only for a key longer than 255 hash lengths
	}
	return key
}

// maxMetaSize is the size of the largest metadata the options can produce.
func maxMetaSize(o *Options) int {
	return len(encodeMeta(nodeMeta{Generation: math.MaxInt64, Load: math.MaxInt64, Address: o.Address, Gateway: o.Gateway, Status: StatusShuttingDown}))
}

// Option injects behaviour into a Membership.
type Option func(*deps)

type deps struct {
	log      *slog.Logger
	clock    clock.Clock
	resolver *net.Resolver
}

// WithLogger sets the logger for membership events and for memberlist's own
// log lines, which memberlist never writes to stdout or stderr itself.
// Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(d *deps) { d.log = l } }

// WithClock sets the clock for the default generation and for rate-limiting
// load publications; memberlist keeps its own timers. Default clock.Real.
func WithClock(c clock.Clock) Option { return func(d *deps) { d.clock = c } }

// WithResolver sets the resolver of the seeds given by name (a resolver
// with its own Dial asks a DNS server of your choice). Default
// net.DefaultResolver.
func WithResolver(r *net.Resolver) Option { return func(d *deps) { d.resolver = r } }
