package cluster

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
)

func validOptions() Options {
	o := Options{SiloID: "silo-a", Address: "127.0.0.1:11111"}
	o.EnsureDefaults()
	return o
}

// problems returns the errors Validate joined.
func problems(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestEnsureDefaultsFillsEveryZeroField(t *testing.T) {
	o := Options{SiloID: "a", Address: "127.0.0.1:11111"}
	o.EnsureDefaults()
	require.NoError(t, o.Validate())
	assert.Equal(t, DefaultBindAddress, o.BindAddress)
	assert.Equal(t, DefaultClusterID, o.ClusterID)
	assert.Equal(t, LANTimings(), o.Timings)

	// Set fields are kept, zero ones filled.
	o = Options{SiloID: "x", BindAddress: "127.0.0.1:0", ClusterID: "c", Timings: Timings{ProbeInterval: 3 * time.Second}}
	o.EnsureDefaults()
	assert.Equal(t, "x", o.SiloID)
	assert.Equal(t, "127.0.0.1:0", o.BindAddress)
	assert.Equal(t, "c", o.ClusterID)
	assert.Equal(t, 3*time.Second, o.Timings.ProbeInterval)
	assert.Equal(t, LANTimings().ProbeTimeout, o.Timings.ProbeTimeout)
}

func TestLANTimingsAreMemberlistsDefaults(t *testing.T) {
	lan, c := LANTimings(), memberlist.DefaultLANConfig()
	assert.Equal(t, c.ProbeInterval, lan.ProbeInterval)
	assert.Equal(t, c.ProbeTimeout, lan.ProbeTimeout)
	assert.Equal(t, c.SuspicionMult, lan.SuspicionMult)
	assert.Equal(t, c.GossipInterval, lan.GossipInterval)
	assert.Equal(t, c.PushPullInterval, lan.PushPullInterval)
}

func TestTimingProfilesAreValid(t *testing.T) {
	for name, timings := range map[string]Timings{"lan": LANTimings(), "fast": FastTimings()} {
		o := validOptions()
		o.Timings = timings
		assert.NoError(t, o.Validate(), name)
	}
}

func TestValidateRejectsEachBadField(t *testing.T) {
	cases := map[string]func(o *Options){
		"empty silo id":              func(o *Options) { o.SiloID = "" },
		"silo id with a space":       func(o *Options) { o.SiloID = "silo a" },
		"silo id too long":           func(o *Options) { o.SiloID = strings.Repeat("s", MaxSiloIDLength+1) },
		"negative generation":        func(o *Options) { o.Generation = -1 },
		"no address":                 func(o *Options) { o.Address = "" },
		"address port zero":          func(o *Options) { o.Address = "127.0.0.1:0" },
		"address too long":           func(o *Options) { o.Address = strings.Repeat("h", 300) + ":1" },
		"bad gateway":                func(o *Options) { o.Gateway = "nowhere" },
		"bind address a name":        func(o *Options) { o.BindAddress = "localhost:7946" },
		"bind address without port":  func(o *Options) { o.BindAddress = "127.0.0.1" },
		"advertise port zero":        func(o *Options) { o.AdvertiseAddress = "10.0.0.1:0" },
		"bad seed":                   func(o *Options) { o.Seeds = []string{"127.0.0.1:7946", "seed"} },
		"cluster id too long":        func(o *Options) { o.ClusterID = strings.Repeat("c", MaxClusterIDLength+1) },
		"short secret":               func(o *Options) { o.Secret = []byte("short") },
		"metadata over memberlist's": func(o *Options) { o.Address, o.Gateway = strings.Repeat("a", 250)+":1", strings.Repeat("g", 250)+":1" },
		"zero probe interval":        func(o *Options) { o.Timings.ProbeInterval = 0 },
		"probe timeout not shorter":  func(o *Options) { o.Timings.ProbeTimeout = o.Timings.ProbeInterval },
		"zero indirect checks":       func(o *Options) { o.Timings.IndirectChecks = 0 },
		"zero suspicion multiplier":  func(o *Options) { o.Timings.SuspicionMult = 0 },
		"negative suspicion max":     func(o *Options) { o.Timings.SuspicionMaxTimeoutMult = -1 },
		"zero awareness":             func(o *Options) { o.Timings.AwarenessMaxMultiplier = 0 },
		"zero gossip interval":       func(o *Options) { o.Timings.GossipInterval = 0 },
		"zero gossip nodes":          func(o *Options) { o.Timings.GossipNodes = 0 },
		"zero gossip to the dead":    func(o *Options) { o.Timings.GossipToTheDeadTime = 0 },
		"zero retransmit multiplier": func(o *Options) { o.Timings.RetransmitMult = 0 },
		"zero push-pull interval":    func(o *Options) { o.Timings.PushPullInterval = 0 },
		"zero tcp timeout":           func(o *Options) { o.Timings.TCPTimeout = 0 },
		"zero dead node reclaim":     func(o *Options) { o.Timings.DeadNodeReclaimTime = 0 },
		"zero join retry interval":   func(o *Options) { o.Timings.JoinRetryInterval = 0 },
		"negative meta interval":     func(o *Options) { o.Timings.MetaUpdateInterval = -time.Second },
		"zero leave timeout":         func(o *Options) { o.Timings.LeaveTimeout = 0 },
		"zero rejoin interval":       func(o *Options) { o.Timings.RejoinInterval = 0 },
		"negative rejoin window":     func(o *Options) { o.Timings.RejoinWindow = -time.Second },
		"rejoin window below the interval": func(o *Options) {
			o.Timings.RejoinInterval, o.Timings.RejoinWindow = time.Second, time.Second-1
		},
	}
	for name, breakIt := range cases {
		o := validOptions()
		breakIt(&o)
		err := o.Validate()
		assert.ErrorIs(t, err, ErrInvalidOptions, name)
		assert.Len(t, problems(err), 1, name)
	}
}

func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	o := Options{SiloID: "a b", Address: "x", BindAddress: "nowhere", ClusterID: "c", Secret: []byte("1")}
	err := o.Validate()
	require.Error(t, err)
	for _, p := range problems(err) {
		assert.ErrorIs(t, p, ErrInvalidOptions)
	}
	// silo id, address, bind address, secret, and the 18 timings left zero.
	assert.Len(t, problems(err), 4+18)
}

func TestNewAppliesDefaultsAndTheClockForTheGeneration(t *testing.T) {
	start := time.Unix(1700000000, 5)
	m, err := New(Options{SiloID: "a", Address: "127.0.0.1:1"}, WithClock(clock.NewFake(start)))
	require.NoError(t, err)
	local := m.Local()
	assert.Equal(t, start.UnixNano(), local.Generation)
	assert.Equal(t, StatusJoining, local.Status)
	assert.Empty(t, local.GossipAddress, "not started")

	_, err = New(Options{SiloID: "a"})
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

func TestNewCopiesSlicesItKeeps(t *testing.T) {
	seeds, secret := []string{"127.0.0.1:1"}, []byte("0123456789abcdef")
	m, err := New(Options{SiloID: "a", Address: "127.0.0.1:1", Seeds: seeds, Secret: secret})
	require.NoError(t, err)
	seeds[0], secret[0] = "changed", 'X'
	assert.Equal(t, "127.0.0.1:1", m.opts.Seeds[0])
	assert.Equal(t, byte('0'), m.opts.Secret[0])
}

func TestOptionsStringLeavesTheSecretOut(t *testing.T) {
	o := validOptions()
	o.Secret = []byte("correct horse battery staple")
	s := o.String()
	assert.NotContains(t, s, "horse")
	assert.Contains(t, s, "silo-a")
}

func TestGossipKeyIsBoundToSecretAndCluster(t *testing.T) {
	a := gossipKey([]byte("0123456789abcdef"), "one")
	assert.Len(t, a, 32, "AES-256")
	assert.Equal(t, a, gossipKey([]byte("0123456789abcdef"), "one"))
	assert.False(t, bytes.Equal(a, gossipKey([]byte("0123456789abcdef"), "two")))
	assert.False(t, bytes.Equal(a, gossipKey([]byte("0123456789abcdeF"), "one")))
	assert.False(t, bytes.Equal(a, []byte("0123456789abcdef0123456789abcdef")[:32]), "the secret itself is not the key")
}
