package netns

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helperEnv makes the test binary act as a helper inside a namespace:
// "listen" prints its address and echoes lines, "dial ADDR" reports whether
// it reaches ADDR within a second.
const helperEnv = "NETNS_TEST_HELPER"

func TestMain(m *testing.M) {
	switch mode := os.Getenv(helperEnv); {
	case mode == "":
		os.Exit(m.Run())
	case strings.HasPrefix(mode, "listen "):
		listen(strings.TrimPrefix(mode, "listen "))
	case strings.HasPrefix(mode, "dial "):
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(mode, "dial "), time.Second)
		if err != nil {
			fmt.Println("unreachable")
			os.Exit(0)
		}
		_ = conn.Close()
		fmt.Println("reached")
		os.Exit(0)
	}
}

func listen(addr string) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("listening")
	for {
		conn, err := l.Accept()
		if err != nil {
			os.Exit(1)
		}
		_ = conn.Close()
	}
}

// helper runs the test binary in node's namespace in the given mode.
func helper(n *Network, node *Node, mode string) *exec.Cmd {
	cmd := n.Command(node, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	return cmd
}

// reaches reports whether a dial from node (nil: the test's namespace)
// reaches addr.
func reaches(t *testing.T, n *Network, from *Node, addr string) bool {
	t.Helper()
	if from == nil {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
		}
		return err == nil
	}
	out, err := helper(n, from, "dial "+addr).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out)) == "reached"
}

// serve starts a listener in node's namespace on port and stops it in
// cleanup.
func serve(t *testing.T, n *Network, node *Node, port string) string {
	t.Helper()
	addr := net.JoinHostPort(node.Addr.String(), port)
	cmd := helper(n, node, "listen "+addr)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "listening\n", line)
	return addr
}

func namespaces(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	require.NoError(t, err)
	return string(out)
}

// Nodes reach each other and the test's namespace reaches them; a cut
// node reaches no other node and no other node reaches it, while the test
// still does; a heal restores every path; and the cleanup removes every
// namespace and the test's link.
func TestCutNodeReachesOnlyTheTestUntilHealed(t *testing.T) {
	var net *Network
	var a, b, c *Node
	t.Run("network", func(t *testing.T) {
		net = New(t)
		a, b, c = net.AddNode("a"), net.AddNode("b"), net.AddNode("c")
		assert.NotEqual(t, a.Addr, b.Addr)
		assert.True(t, net.subnet.Contains(c.Addr) && net.subnet.Contains(net.HostAddr()))
		addrA, addrC := serve(t, net, a, "7000"), serve(t, net, c, "7000")

		assert.True(t, reaches(t, net, b, addrA), "b reaches a")
		assert.True(t, reaches(t, net, b, addrC), "b reaches c")
		assert.True(t, reaches(t, net, nil, addrC), "the test reaches c")

		require.NoError(t, net.Cut(c))
		require.NoError(t, net.Cut(c), "a second cut adds nothing")
		assert.False(t, reaches(t, net, b, addrC), "b does not reach cut c")
		assert.False(t, reaches(t, net, c, addrA), "cut c does not reach a")
		assert.True(t, reaches(t, net, b, addrA), "b still reaches a")
		assert.True(t, reaches(t, net, nil, addrC), "the test still reaches cut c")

		require.NoError(t, net.Heal(c))
		require.NoError(t, net.Heal(c), "a second heal does nothing")
		assert.True(t, reaches(t, net, b, addrC), "b reaches healed c")
		assert.True(t, reaches(t, net, c, addrA), "healed c reaches a")

		require.NoError(t, net.Down(a))
		assert.False(t, reaches(t, net, nil, addrA), "nothing reaches a whose link is down")
		require.NoError(t, net.Up(a))
		// The link takes a moment to carry again, and the neighbour entry
		// the failed dial left must be resolved afresh.
		assert.Eventually(t, func() bool { return reaches(t, net, nil, addrA) }, 10*time.Second, 50*time.Millisecond, "a is back")
		assert.Contains(t, namespaces(t), a.Namespace)
	})
	require.NotNil(t, net)
	list := namespaces(t)
	for _, ns := range []string{a.Namespace, b.Namespace, c.Namespace, net.hub} {
		assert.NotContains(t, list, ns, "cleanup deleted %s", ns)
	}
	assert.False(t, linkExists(net.hostEnd), "cleanup deleted the test's link")
}

// CutAll also cuts the node from ServiceAddr, and only from it: the
// test's clients, on HostAddr, still reach the node.
func TestCutAllCutsTheServiceAddressToo(t *testing.T) {
	n := New(t)
	a := n.AddNode("a")
	service := net.JoinHostPort(n.ServiceAddr().String(), "0")
	l, err := net.Listen("tcp", service)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()
	addrA := serve(t, n, a, "7000")
	assert.True(t, reaches(t, n, a, l.Addr().String()), "a reaches the service")
	require.NoError(t, n.CutAll(a))
	assert.False(t, reaches(t, n, a, l.Addr().String()), "cut a does not reach the service")
	assert.True(t, reaches(t, n, nil, addrA), "the test's clients still reach cut a")
	require.NoError(t, n.Heal(a))
	assert.True(t, reaches(t, n, a, l.Addr().String()), "healed a reaches the service")
}

// A namespace of this package whose creating process is gone is swept by
// the next New; one of a live process stays.
func TestNewSweepsNamespacesOfDeadProcesses(t *testing.T) {
	if err := available(); err != nil {
		t.Skipf("netns: %v; run as root with iproute2 installed to run this test", err)
	}
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	stale := fmt.Sprintf("%s-%d-zzzzz-1", prefix, dead.Process.Pid)
	live := fmt.Sprintf("%s-%d-zzzzz-1", prefix, os.Getpid())
	for _, ns := range []string{stale, live} {
		require.NoError(t, ip("netns", "add", ns))
		t.Cleanup(func() { _ = ip("netns", "del", ns) })
	}
	New(t)
	list := namespaces(t)
	assert.NotContains(t, list, stale)
	assert.Contains(t, list, live)
}
