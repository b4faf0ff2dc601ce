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
