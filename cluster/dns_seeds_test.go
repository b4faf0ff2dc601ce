package cluster

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
)

// fakeDNS is a DNS server on loopback whose answers a test changes while
// silos resolve their seeds through it.
type fakeDNS struct {
	addr string
	mu   sync.Mutex
	rrs  map[string][]dns.RR // by name and type: "name/TYPE"
}

func startFakeDNS(t testing.TB) *fakeDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeDNS{addr: pc.LocalAddr().String(), rrs: map[string][]dns.RR{}}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(f.serve), NotifyStartedFunc: func() { close(started) }}
	served := make(chan error, 1)
	go func() { served <- srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() {
		require.NoError(t, srv.Shutdown())
		<-served
	})
	return f
}

func (f *fakeDNS) serve(w dns.ResponseWriter, req *dns.Msg) {
	reply := new(dns.Msg)
	reply.SetReply(req)
	f.mu.Lock()
	known := false
	for _, q := range req.Question {
		for key, rrs := range f.rrs {
			if name, _, _ := cutKey(key); name == q.Name {
				known = true
			}
			if key == q.Name+"/"+dns.TypeToString[q.Qtype] {
				reply.Answer = append(reply.Answer, rrs...)
			}
		}
	}
	f.mu.Unlock()
	if !known {
		reply.Rcode = dns.RcodeNameError
	}
	_ = w.WriteMsg(reply)
}

func cutKey(key string) (name, typ string, ok bool) {
	for i := len(key) - 1; i >= 0; i-- {
		if key[i] == '/' {
			return key[:i], key[i+1:], true
		}
	}
	return key, "", false
}

// set replaces every answer with records, given in zone file syntax.
func (f *fakeDNS) set(t testing.TB, records ...string) {
	t.Helper()
	rrs := map[string][]dns.RR{}
	for _, text := range records {
		rr, err := dns.NewRR(text)
		require.NoError(t, err)
		key := rr.Header().Name + "/" + dns.TypeToString[rr.Header().Rrtype]
		rrs[key] = append(rrs[key], rr)
	}
	f.mu.Lock()
	f.rrs = rrs
	f.mu.Unlock()
}

// resolver asks this server only, as a pod's resolver asks the cluster's.
func (f *fakeDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", f.addr)
	}}
}

func TestSeedNamesFollowTheirDNSAnswers(t *testing.T) {
	dnsServer := startFakeDNS(t)
	r := seedResolver{
		seeds:    []string{"silo.granary.test.:7946", SRVSeedPrefix + "_gossip._tcp.granary.test.", "10.0.0.9:7946", "gone.granary.test.:7946", "10.0.0.9:7946"},
		resolver: dnsServer.resolver(),
	}
	dnsServer.set(t,
		"silo.granary.test. 5 IN A 10.0.0.1",
		"silo.granary.test. 5 IN AAAA fd00::1",
		"_gossip._tcp.granary.test. 5 IN SRV 0 0 7001 a.granary.test.",
		"_gossip._tcp.granary.test. 5 IN SRV 0 0 7002 b.granary.test.",
		"a.granary.test. 5 IN A 10.0.0.2",
		"b.granary.test. 5 IN A 10.0.0.3",
	)
	got := r.resolve(context.Background())
	assert.Equal(t, [][]string{{"10.0.0.1:7946", "[fd00::1]:7946"}, {"10.0.0.2:7001"}, {"10.0.0.3:7002"}, {"10.0.0.9:7946"}}, sortedHosts(got.hosts))
	assert.Equal(t, []string{"gone.granary.test.:7946"}, got.unresolved, "a name without records is unresolved; a repeated IP seed is not")
	assert.Error(t, got.err)

	// The pods restarted: new addresses, one SRV target fewer.
	dnsServer.set(t,
		"silo.granary.test. 5 IN A 10.0.1.1",
		"_gossip._tcp.granary.test. 5 IN SRV 0 0 7003 b.granary.test.",
		"b.granary.test. 5 IN A 10.0.1.3",
		"gone.granary.test. 5 IN A 10.0.1.4",
	)
	got = r.resolve(context.Background())
	assert.Equal(t, [][]string{{"10.0.1.1:7946"}, {"10.0.1.3:7003"}, {"10.0.0.9:7946"}, {"10.0.1.4:7946"}}, sortedHosts(got.hosts))
	assert.Empty(t, got.unresolved)
	assert.NoError(t, got.err)
}

// sortedHosts orders the SRV targets, which DNS may return in any order
// among records of equal priority and weight.
func sortedHosts(hosts [][]string) [][]string {
	out := append([][]string(nil), hosts...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && len(out[j]) == 1 && len(out[j-1]) == 1 && isSRVPort(out[j]) && isSRVPort(out[j-1]) && out[j][0] < out[j-1][0]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func isSRVPort(host []string) bool {
	_, port, _ := net.SplitHostPort(host[0])
	return port != "7946"
}

func TestSeedsAreRefusedWhenNeitherAddressNorSRVName(t *testing.T) {
	for _, seed := range []string{SRVSeedPrefix, SRVSeedPrefix + "_gossip._tcp.x:7946", "granary-0.granary-gossip", "granary-0:0"} {
		o := siloOptions("a", seed)
		o.EnsureDefaults()
		assert.ErrorIs(t, o.Validate(), ErrInvalidOptions, "seed %q", seed)
	}
	o := siloOptions("a", SRVSeedPrefix+"_gossip._tcp.granary-gossip", "granary-0.granary-gossip:7946")
	o.EnsureDefaults()
	assert.NoError(t, o.Validate())
}

func TestAClusterWhoseSeedsAllRestartedConvergesThroughDNS(t *testing.T) {
	dnsServer := startFakeDNS(t)
	const seed = SRVSeedPrefix + "_gossip._udp.granary.test."
	point := func(a, b string) {
		_, portA, _ := net.SplitHostPort(a)
		_, portB, _ := net.SplitHostPort(b)
		dnsServer.set(t,
			"_gossip._udp.granary.test. 5 IN SRV 0 0 "+portA+" a.granary.test.",
			"_gossip._udp.granary.test. 5 IN SRV 0 0 "+portB+" b.granary.test.",
			"a.granary.test. 5 IN A 127.0.0.1",
			"b.granary.test. 5 IN A 127.0.0.1",
		)
	}
	withResolver := WithResolver(dnsServer.resolver())
	startSeeds := func() (a, b *Membership) {
		addrA, addrB := freeGossipAddress(t), freeGossipAddress(t)
		point(addrA, addrB)
		var wg sync.WaitGroup
		wg.Go(func() { a = startSilo(t, everySeed("a", addrA, []string{seed}), withResolver) })
		wg.Go(func() { b = startSilo(t, everySeed("b", addrB, []string{seed}), withResolver) })
		wg.Wait()
		return a, b
	}

	a, b := startSeeds()
	c := startSilo(t, siloOptions("c", seed), withResolver) // not a seed: the DNS never names it
	waitForViews(t, []*Membership{a, b, c}, a, b, c)

	// Every seed restarts at a new address, as pods of a StatefulSet do.
	a.Kill()
	b.Kill()
	waitForViews(t, []*Membership{c}, c)
	a, b = startSeeds()
	// a and b find each other through the new answers; c, whose seeds'
	// old addresses are dead, finds them only by resolving again.
	require.Eventually(t, func() bool {
		for _, m := range []*Membership{a, b, c} {
			v := m.View()
			gotA, okA := v.Member("a")
			gotB, okB := v.Member("b")
			if len(v.Members) != 3 || !okA || !okB || gotA.GossipAddress != a.GossipAddress() || gotB.GossipAddress != b.GossipAddress() {
				return false
			}
		}
		return true
	}, waitFor, 5*time.Millisecond, "views: a %v, b %v, c %v", a.View(), b.View(), c.View())
}

func TestASeedNameThatResolvesToNothingYetIsWaitedFor(t *testing.T) {
	dnsServer := startFakeDNS(t)
	dnsServer.set(t) // no records at all: the name does not exist yet
	first := startSilo(t, siloOptions("first"))
	_, port, err := net.SplitHostPort(first.GossipAddress())
	require.NoError(t, err)
	opts := siloOptions("early", "later.granary.test.:"+port)
	m, err := New(opts, WithLogger(discard), WithResolver(dnsServer.resolver()))
	require.NoError(t, err)
	t.Cleanup(m.Kill)
	started := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		started <- m.Start(ctx)
	}()
	// It waits rather than forming a cluster of its own.
	require.Never(t, func() bool { return len(started) > 0 }, 20*opts.Timings.JoinRetryInterval, 5*time.Millisecond)
	// Once the name resolves, it joins.
	dnsServer.set(t, "later.granary.test. 5 IN A 127.0.0.1")
	require.NoError(t, <-started)
	waitForViews(t, []*Membership{first, m}, first, m)
}

// A seed that leaves DNS, as a pod scaled down does, is dialled no more by
// the rejoin loop: each round resolves the seeds again. Before seeds were
// resolved, a seed given by name was dialled every round for as long as
// the silo ran. The membership's clock is fake, so that the loop itself
// runs no round while the test asks what one would dial.
func TestASeedThatLeftDNSIsDialledNoMore(t *testing.T) {
	dnsServer := startFakeDNS(t)
	dnsServer.set(t,
		"stay.granary.test. 5 IN A 127.0.0.1",
		"gone.granary.test. 5 IN A 127.0.0.2",
	)
	first := startSilo(t, siloOptions("first"))
	// Ports nothing listens on: the dials of Start are refused at once.
	stay, gone := freeGossipAddress(t), freeGossipAddress(t)
	_, stayPort, _ := net.SplitHostPort(stay)
	_, gonePort, _ := net.SplitHostPort(gone)
	fake := clock.NewFake(time.Unix(1700000000, 0))
	m := startSilo(t, siloOptions("m", first.GossipAddress(), "stay.granary.test.:"+stayPort, "gone.granary.test.:"+gonePort),
		WithResolver(dnsServer.resolver()), WithClock(fake))
	waitForViews(t, []*Membership{first, m}, first, m)

	assert.ElementsMatch(t, []string{"127.0.0.1:" + stayPort, "127.0.0.2:" + gonePort}, m.rejoinDue(),
		"both seeds are dialled while DNS names them; the one a member gossips at is not")
	dnsServer.set(t, "stay.granary.test. 5 IN A 127.0.0.1") // gone is scaled down
	assert.Equal(t, []string{"127.0.0.1:" + stayPort}, m.rejoinDue(), "the seed that left DNS is not dialled")
	dnsServer.set(t,
		"stay.granary.test. 5 IN A 127.0.0.1",
		"gone.granary.test. 5 IN A 127.0.0.3",
	)
	assert.ElementsMatch(t, []string{"127.0.0.1:" + stayPort, "127.0.0.3:" + gonePort}, m.rejoinDue(),
		"a name that comes back is dialled at its new address")
}
