package netns

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const (
	// ciEnv set to "1" turns a missing prerequisite into a test failure.
	ciEnv = "GRANARY_CI"
	// prefix starts every namespace and link name this package makes, so
	// that the sweep of stale namespaces touches nothing else.
	prefix = "gnt"
	// maxNodes bounds the nodes of one network: node addresses are .1 to
	// .maxNodes of the /24; the hub and the test's namespace take the top.
	maxNodes = 200
	// hostOctet and serviceOctet are the test namespace's addresses.
	hostOctet, serviceOctet = 254, 253
)

// ErrNotAvailable is what New reports, as a skip or a failure, when the
// machine cannot build a network: not root, or no ip(8).
var ErrNotAvailable = errors.New("netns: network namespaces need root and ip(8)")

// Network is one test's network: the hub, its bridge, the nodes, and the
// link to the test's namespace. Its methods may be called from any
// goroutine.
type Network struct {
	tb      testing.TB
	id      string // the random part of every name
	subnet  netip.Prefix
	hub     string
	hostEnd string // the veth end in the test's namespace

	mu struct {
		sync.Mutex
		nodes []*Node
		cut   map[*Node][]route // routes Cut added, by cut node
	}
}

// Node is one namespace on the network, with one address.
type Node struct {
	// Name is the node's name in the test, as given to AddNode.
	Name string
	// Namespace is the network namespace's name, for ip netns exec.
	Namespace string
	// Addr is the node's address on the network.
	Addr netip.Addr
	// link is the veth end in the node's namespace.
	link string
}

// route is a blackhole route to dst added in namespace ns.
type route struct {
	ns  string
	dst netip.Addr
}

// New builds an empty network for tb (a hub with a bridge and a link to
// tb's namespace) and removes it, with every node added later, in tb's
// cleanup. It skips tb when the machine cannot (not root, no ip), or fails
// it under GRANARY_CI=1. First it deletes the namespaces that runs whose
// process is gone left behind.
func New(tb testing.TB) *Network {
	tb.Helper()
	if err := available(); err != nil {
		if os.Getenv(ciEnv) == "1" {
			tb.Fatalf("netns: %v, and %s=1 requires these tests: run them as root with iproute2 installed", err, ciEnv)
		}
		tb.Skipf("netns: %v; run as root with iproute2 installed to run this test", err)
	}
	sweepStale(tb)
	n := &Network{tb: tb, id: randomID(tb)}
	n.mu.cut = make(map[*Node][]route)
	n.hub = n.nsName("hub")
	n.hostEnd = prefix + n.id + "t"
	subnet, err := freeSubnet()
	if err != nil {
		tb.Fatalf("netns: %v", err)
	}
	n.subnet = subnet
	tb.Cleanup(n.remove)

	hubEnd := prefix + n.id + "u"
	bridge := prefix + n.id + "b"
	n.must("netns", "add", n.hub)
	n.must("-n", n.hub, "link", "set", "lo", "up")
	n.must("-n", n.hub, "link", "add", bridge, "type", "bridge")
	n.must("-n", n.hub, "link", "set", bridge, "up")
	n.must("link", "add", n.hostEnd, "type", "veth", "peer", "name", hubEnd)
	n.must("link", "set", hubEnd, "netns", n.hub)
	n.must("-n", n.hub, "link", "set", hubEnd, "master", bridge)
	n.must("-n", n.hub, "link", "set", hubEnd, "up")
	n.must("addr", "add", n.prefixed(hostOctet), "dev", n.hostEnd)
	n.must("addr", "add", n.prefixed(serviceOctet), "dev", n.hostEnd)
	n.must("link", "set", n.hostEnd, "up")
	return n
}

// HostAddr is the address of the test's namespace on the network: the
// source of its clients' connections to the nodes.
func (n *Network) HostAddr() netip.Addr { return n.addr(hostOctet) }

// ServiceAddr is a second address of the test's namespace, for a server the
// test runs for the nodes (a store): CutAll cuts a node from it, while the
// node still answers the test's clients on HostAddr.
func (n *Network) ServiceAddr() netip.Addr { return n.addr(serviceOctet) }

// AddNode adds a namespace joined to the bridge, with the next address of
// the network on its link and the loopback up.
func (n *Network) AddNode(name string) *Node {
	n.tb.Helper()
	n.mu.Lock()
	index := len(n.mu.nodes) + 1
	n.mu.Unlock()
	if index > maxNodes {
		n.tb.Fatalf("netns: more than %d nodes", maxNodes)
	}
	node := &Node{
		Name:      name,
		Namespace: n.nsName(strconv.Itoa(index)),
		Addr:      n.addr(byte(index)),
		link:      prefix + n.id + "n" + strconv.Itoa(index),
	}
	hubEnd := prefix + n.id + "h" + strconv.Itoa(index)
	n.must("netns", "add", node.Namespace)
	n.mu.Lock()
	n.mu.nodes = append(n.mu.nodes, node)
	n.mu.Unlock()
	n.must("-n", node.Namespace, "link", "set", "lo", "up")
	n.must("-n", n.hub, "link", "add", hubEnd, "type", "veth", "peer", "name", node.link, "netns", node.Namespace)
	n.must("-n", n.hub, "link", "set", hubEnd, "master", prefix+n.id+"b")
	n.must("-n", n.hub, "link", "set", hubEnd, "up")
	n.must("-n", node.Namespace, "addr", "add", n.prefixed(byte(index)), "dev", node.link)
	n.must("-n", node.Namespace, "link", "set", node.link, "up")
	return node
}

// Command returns a command that runs name with args inside node's
// namespace. The kernel kills it if the test process dies first, so that no
// process outlives a test killed before its cleanups.
func (n *Network) Command(node *Node, name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", node.Namespace, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Cut cuts node off from every other node, both ways: packets between them
// are dropped. The test's addresses stay reachable from node. Cutting a cut
// node again adds nothing.
func (n *Network) Cut(node *Node) error { return n.cut(node, false) }

// CutAll cuts node off from every other node and from ServiceAddr; only
// HostAddr, the test's clients, still reaches it.
func (n *Network) CutAll(node *Node) error { return n.cut(node, true) }

func (n *Network) cut(node *Node, service bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.mu.cut[node]) > 0 {
		return nil
	}
	var routes []route
	for _, other := range n.mu.nodes {
		if other == node {
			continue
		}
		routes = append(routes, route{ns: node.Namespace, dst: other.Addr}, route{ns: other.Namespace, dst: node.Addr})
	}
	if service {
		routes = append(routes, route{ns: node.Namespace, dst: n.ServiceAddr()})
	}
	for i, r := range routes {
		if err := ip("-n", r.ns, "route", "add", "blackhole", r.dst.String()+"/32"); err != nil {
			n.deleteRoutes(routes[:i])
			return err
		}
	}
	n.mu.cut[node] = routes
	return nil
}

// Heal removes what Cut or CutAll added for node. Healing a node that is
// not cut does nothing.
func (n *Network) Heal(node *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	err := n.deleteRoutes(n.mu.cut[node])
	delete(n.mu.cut, node)
	return err
}

// deleteRoutes deletes blackhole routes, reporting every failure.
func (n *Network) deleteRoutes(routes []route) error {
	var errs []error
	for _, r := range routes {
		errs = append(errs, ip("-n", r.ns, "route", "del", "blackhole", r.dst.String()+"/32"))
	}
	return errors.Join(errs...)
}

// Down takes node's link down: nothing reaches it, not even the test.
func (n *Network) Down(node *Node) error {
	return ip("-n", node.Namespace, "link", "set", node.link, "down")
}

// Up brings node's link up again after Down.
func (n *Network) Up(node *Node) error {
	return ip("-n", node.Namespace, "link", "set", node.link, "up")
}

// remove deletes the network: the link to the test's namespace, the nodes'
// namespaces and the hub (and with them the bridge and every veth pair). It
// reports what it could not delete.
func (n *Network) remove() {
	n.mu.Lock()
	nodes := n.mu.nodes
	n.mu.nodes = nil
	n.mu.Unlock()
	// The test's end first: deleting a namespace frees its veth ends
	// asynchronously, and the test's end must not outlive the test.
	if linkExists(n.hostEnd) {
		if err := ip("link", "del", n.hostEnd); err != nil {
			n.tb.Errorf("netns: cleanup: %v", err)
		}
	}
	for _, node := range nodes {
		if err := ip("netns", "del", node.Namespace); err != nil {
			n.tb.Errorf("netns: cleanup: %v", err)
		}
	}
	if err := ip("netns", "del", n.hub); err != nil && !strings.Contains(err.Error(), "No such file") {
		n.tb.Errorf("netns: cleanup: %v", err)
	}
}

// must runs ip with args and fails the test if it fails.
func (n *Network) must(args ...string) {
	n.tb.Helper()
	if err := ip(args...); err != nil {
		n.tb.Fatalf("netns: %v", err)
	}
}

// nsName is the name of a namespace of this network: the prefix, the
// creating process's id (for the sweep), the network's id and a part.
func (n *Network) nsName(part string) string {
	return fmt.Sprintf("%s-%d-%s-%s", prefix, os.Getpid(), n.id, part)
}

func (n *Network) addr(last byte) netip.Addr {
	a := n.subnet.Addr().As4()
	a[3] = last
	return netip.AddrFrom4(a)
}

func (n *Network) prefixed(last byte) string {
	return netip.PrefixFrom(n.addr(last), 24).String()
}

// available reports whether this process can build networks.
func available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not root", ErrNotAvailable)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: ip not on PATH", ErrNotAvailable)
	}
	return nil
}

// ip runs ip(8) with args, returning its error output as the error.
func ip(args ...string) error {
	cmd := exec.Command("ip", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func linkExists(name string) bool {
	return exec.Command("ip", "link", "show", "dev", name).Run() == nil
}

// sweepStale deletes this package's namespaces whose creating process is
// gone: left by a test binary killed before its cleanups. Namespaces of
// live processes, parallel runs included, stay.
func sweepStale(tb testing.TB) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		parts := strings.SplitN(name, "-", 4)
		if len(parts) != 4 || parts[0] != prefix {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil || processAlive(pid) {
			continue
		}
		if err := ip("netns", "del", name); err != nil {
			tb.Logf("netns: sweeping a stale namespace: %v", err)
		}
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// freeSubnet picks a /24 of 10.231.0.0/16 that no address or route of this
// namespace overlaps.
func freeSubnet() (netip.Prefix, error) {
	routes, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list routes: %w", err)
	}
	addrs, err := exec.Command("ip", "-4", "-o", "addr", "show").Output()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list addresses: %w", err)
	}
	var used []netip.Prefix
	for _, field := range strings.Fields(string(routes) + " " + string(addrs)) {
		if p, err := netip.ParsePrefix(field); err == nil {
			used = append(used, p.Masked())
		} else if a, err := netip.ParseAddr(field); err == nil && a.Is4() {
			used = append(used, netip.PrefixFrom(a, 32))
		}
	}
	for range 64 {
		third, err := rand.Int(rand.Reader, big.NewInt(256))
		if err != nil {
			return netip.Prefix{}, err
		}
		candidate := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 231, byte(third.Int64()), 0}), 24)
		free := true
		for _, p := range used {
			if p.Overlaps(candidate) && p.Bits() > 0 {
				free = false
				break
			}
		}
		if free {
			return candidate, nil
		}
	}
	return netip.Prefix{}, errors.New("no free /24 in 10.231.0.0/16")
}

// randomID is five hex digits: short enough for a link name (15 bytes at
// most) with the prefix and a part, random enough for parallel runs.
func randomID(tb testing.TB) string {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("netns: %v", err)
	}
	return hex.EncodeToString(b[:])[:5]
}
