// Package gossipcut partitions gossip between silos of one process, for
// tests: a Cut wraps each silo's memberlist transport and drops the packets
// and refuses the streams between gossip addresses it was told to keep
// apart, as a network partition would, until Heal.
//
//	cut := gossipcut.New()
//	ctx = gossipcut.NewContext(ctx, cut) // package cluster's Start picks it up
//	...start silos a, b and c with ctx...
//	cut.Partition([]string{a, b}, []string{c})
//	cut.Heal()
//
// Every silo of the test must gossip through the same Cut: a Cut filters
// what its transports send, not what they receive, so a silo outside it
// still reaches the others.
package gossipcut

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrCut is returned by a dial across a cut.
var ErrCut = errors.New("gossipcut: the network is cut between these addresses")

// Cut decides which gossip addresses can reach each other. Its zero value is
// not usable; make one with New. It is safe for concurrent use.
type Cut struct {
	dropped atomic.Int64
	mu      struct {
		sync.Mutex
		group    map[string]int      // address -> side of the partition
		isolated map[string]struct{} // addresses cut off from every other
	}
}

// New returns a Cut through which every address reaches every other.
func New() *Cut {
	c := &Cut{}
	c.mu.group = map[string]int{}
	c.mu.isolated = map[string]struct{}{}
	return c
}

// Partition splits the named gossip addresses into groups that cannot
// reach each other; addresses within a group, and addresses no group names,
// still reach everyone. It replaces any earlier Partition (Isolate stays).
func (c *Cut) Partition(groups ...[]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.group = map[string]int{}
	for i, g := range groups {
		for _, a := range g {
			c.mu.group[normalize(a)] = i + 1
		}
	}
}

// Isolate cuts each named gossip address off from every other address.
func (c *Cut) Isolate(addrs ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range addrs {
		c.mu.isolated[normalize(a)] = struct{}{}
	}
}

// Heal undoes every Partition and Isolate.
func (c *Cut) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.group = map[string]int{}
	c.mu.isolated = map[string]struct{}{}
}

// Dropped counts the packets dropped and the dials refused so far; a test
// reads it to know its cut took effect.
func (c *Cut) Dropped() int64 { return c.dropped.Load() }

// blocked reports whether from may not reach to, and counts it.
func (c *Cut) blocked(from, to string) bool {
	to = normalize(to)
	c.mu.Lock()
	_, fromIsolated := c.mu.isolated[from]
	_, toIsolated := c.mu.isolated[to]
	gf, gt := c.mu.group[from], c.mu.group[to]
	c.mu.Unlock()
	cut := from != to && (fromIsolated || toIsolated || (gf != 0 && gt != 0 && gf != gt))
	if cut {
		c.dropped.Add(1)
	}
	return cut
}

// normalize spells an IP:port address one way, so that "127.0.0.1:7946"
// and "[::ffff:127.0.0.1]:7946" name the same silo; other strings are kept.
func normalize(addr string) string {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return addr
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
}

// Transport returns a memberlist transport listening on bindAddr:bindPort
// (port 0 picks one) whose traffic to the addresses cut off from its own
// is lost. memberlist shuts it down.
func (c *Cut) Transport(bindAddr string, bindPort int, logger *log.Logger) (memberlist.NodeAwareTransport, error) {
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{bindAddr},
		BindPort:  bindPort,
		Logger:    logger,
	})
	if err != nil {
		return nil, fmt.Errorf("gossipcut: %w", err)
	}
	t := &transport{NetTransport: nt, cut: c}
	t.local.Store(normalize(net.JoinHostPort(bindAddr, fmt.Sprint(nt.GetAutoBindPort()))))
	return t, nil
}

// transport is a NetTransport whose sends consult the Cut.
type transport struct {
	*memberlist.NetTransport
	cut   *Cut
	local atomic.Value // string: the gossip address others know it by
}

var _ memberlist.NodeAwareTransport = (*transport)(nil)

// FinalAdvertiseAddr records the address memberlist advertises, which is
// the one the other silos' Cut rules name.
func (t *transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	addr, p, err := t.NetTransport.FinalAdvertiseAddr(ip, port)
	if err == nil {
		t.local.Store(normalize(net.JoinHostPort(addr.String(), fmt.Sprint(p))))
	}
	return addr, p, err
}

func (t *transport) from() string { return t.local.Load().(string) }

func (t *transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

func (t *transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.cut.blocked(t.from(), a.Addr) {
		return time.Now(), nil // lost on the way, as UDP may be
	}
	return t.NetTransport.WriteToAddress(b, a)
}

func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.cut.blocked(t.from(), a.Addr) {
		return nil, fmt.Errorf("%w: %s to %s", ErrCut, t.from(), a.Addr)
	}
	return t.NetTransport.DialAddressTimeout(a, timeout)
}

type contextKey struct{}

// NewContext returns ctx carrying c. Package cluster's Membership.Start
// gossips through the Cut its context carries: that is how a test installs
// the seam without a public option.
func NewContext(ctx context.Context, c *Cut) context.Context {
	return context.WithValue(ctx, contextKey{}, c)
}

// FromContext returns the Cut ctx carries, or nil.
func FromContext(ctx context.Context) *Cut {
	c, _ := ctx.Value(contextKey{}).(*Cut)
	return c
}
