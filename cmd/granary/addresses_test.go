package main

import (
	"flag"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parseSiloFlags(t *testing.T, args ...string) *siloFlags {
	t.Helper()
	s := newSettings(flag.NewFlagSet("t", flag.ContinueOnError))
	f := defineSiloFlags(s)
	require.NoError(t, s.fs.Parse(args))
	return f
}

func TestAddressesComeFromTheEnvironment(t *testing.T) {
	t.Setenv("POD_IP", "10.1.2.3")
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("0123456789abcdef0123"), 0o600))
	f := parseSiloFlags(t, "-secret-file", secret, "-silo-address", "$POD_IP:11111", "-gossip", "${POD_IP}:7946",
		"-gateway", "${POD_IP}:30000", "-seeds", "${POD_IP}:7946,granary-1.granary-gossip:7946")
	o, err := f.options()
	require.NoError(t, err)
	assert.Equal(t, "10.1.2.3:11111", o.Cluster.SiloAddress)
	assert.Equal(t, "10.1.2.3:7946", o.Cluster.GossipAddress)
	assert.Equal(t, "10.1.2.3:30000", o.GatewayAddress)
	assert.Equal(t, []string{"10.1.2.3:7946", "granary-1.granary-gossip:7946"}, o.Cluster.Seeds)
}

func TestAnAddressNamingAnUnsetVariableIsRefused(t *testing.T) {
	t.Setenv("POD_IP", "")
	f := parseSiloFlags(t, "-silo-address", "127.0.0.1:11111", "-gossip", "${POD_IP}:7946")
	_, err := f.options()
	require.ErrorContains(t, err, `-gossip "${POD_IP}:7946": $POD_IP not set in the environment`)
}

// loopbackInterface is the name of this machine's loopback interface.
func loopbackInterface(t *testing.T) string {
	t.Helper()
	ifaces, err := net.Interfaces()
	require.NoError(t, err)
	for _, i := range ifaces {
		if i.Flags&net.FlagLoopback != 0 && i.Flags&net.FlagUp != 0 {
			return i.Name
		}
	}
	t.Skip("no loopback interface that is up")
	return ""
}

func TestAddressesComeFromANetworkInterface(t *testing.T) {
	lo := loopbackInterface(t)
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("0123456789abcdef0123"), 0o600))
	f := parseSiloFlags(t, "-secret-file", secret, "-silo-address", "${interface:"+lo+"}:11111", "-gossip", "${interface:"+lo+"}:7946")
	o, err := f.options()
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:11111", o.Cluster.SiloAddress, "the interface's IPv4 address")
	assert.Equal(t, "127.0.0.1:7946", o.Cluster.GossipAddress)
}

func TestAnAddressNamingAMissingInterfaceIsRefused(t *testing.T) {
	f := parseSiloFlags(t, "-silo-address", "127.0.0.1:11111", "-gossip", "${interface:no-such-if0}:7946")
	_, err := f.options()
	require.ErrorContains(t, err, `-gossip "${interface:no-such-if0}:7946": interface "no-such-if0"`)
}
