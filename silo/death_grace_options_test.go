package silo_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/silo"
)

// The death's grace defaults to the time a suspected silo has to refute
// the suspicion on the cluster's timings, and a negative one stays: it
// turns the grace off.
func TestTheDeathGraceDefaultsToTheSuspicionTime(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timings cluster.Timings
		grace   time.Duration
		want    time.Duration
	}{
		{"LAN", cluster.Timings{}, 0, 4 * time.Second},
		{"fast", cluster.FastTimings(), 0, 200 * time.Millisecond},
		{"slow probes", cluster.Timings{ProbeInterval: 3 * time.Second, SuspicionMult: 5}, 0, 15 * time.Second},
		{"set", cluster.Timings{}, time.Second, time.Second},
		{"off", cluster.Timings{}, -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := silo.Options{Cluster: silo.ClusterOptions{Enabled: true, Timings: tc.timings, DeathGrace: tc.grace}}
			o.EnsureDefaults()
			assert.Equal(t, tc.want, o.Cluster.DeathGrace)
		})
	}
}

// The death fence takes a silo for dead after a stall a little shorter
// than the others need to declare it dead and end its grace, and holds
// for the minority fence's stability period; a negative stall stays, and
// turns the watch of stalls off.
func TestTheDeathFenceDefaultsFollowTheGraceAndTheTimings(t *testing.T) {
	for _, tc := range []struct {
		name                string
		timings             cluster.Timings
		grace, stall        time.Duration
		wantStall, wantHold time.Duration
	}{
		{"LAN", cluster.Timings{}, 0, 0, 7 * time.Second, 6 * time.Second},
		{"fast", cluster.FastTimings(), 0, 0, 350 * time.Millisecond, 300 * time.Millisecond},
		{"no grace", cluster.Timings{}, -1, 0, 3 * time.Second, 6 * time.Second},
		{"stalls not watched", cluster.Timings{}, 0, -1, -1, 6 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := silo.Options{Cluster: silo.ClusterOptions{Enabled: true, Timings: tc.timings, DeathGrace: tc.grace}}
			o.Cluster.Fence.Death.Stall = tc.stall
			o.EnsureDefaults()
			assert.Equal(t, tc.wantStall, o.Cluster.Fence.Death.Stall)
			assert.Equal(t, tc.wantHold, o.Cluster.Fence.Death.Hold)
		})
	}
	o := silo.Options{Cluster: silo.ClusterOptions{Enabled: true}}
	o.Cluster.Fence.Death.Hold = -time.Second
	o.EnsureDefaults()
	assert.ErrorContains(t, o.Validate(), "Cluster.Fence.Death.Hold")
}
