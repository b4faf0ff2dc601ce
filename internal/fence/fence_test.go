package fence

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const period = 10 * time.Second

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// step is one event fed to the fence of silo "a" and what it must say after.
type step struct {
	at        time.Duration // since t0
	reachable string        // observed reachable members, comma-separated ("" for none but a); ignored for a leave
	members   string        // observed members that are not reachable, comma-separated
	left      string        // a member that left gracefully, instead of an observation
	fenced    bool
	stable    string // the stable membership after the event
	reason    string // a substring of the reason, when fenced
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func observations(reachable, unreachable string) []Observation {
	var obs []Observation
	for _, id := range split(reachable) {
		obs = append(obs, Observation{ID: id, Reachable: true})
	}
	for _, id := range split(unreachable) {
		obs = append(obs, Observation{ID: id})
	}
	return obs
}

// stableAfter starts a fence of silo a whose stable membership is members,
// observed at t0 and again at t0+period.
func stableAfter(t *testing.T, min int, members string) *Fence {
	t.Helper()
	f := New(Options{Self: "a", MinSilos: min, Stability: period})
	f.Observe(t0, observations(members, ""))
	st := f.Observe(t0.Add(period), observations(members, ""))
	require.Equal(t, split(members), st.Stable)
	require.False(t, st.Fenced)
	return f
}

func TestFenceTransitions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		min     int
		initial string // stable membership at t0+period, "" for a fresh fence
		steps   []step
	}{
		{
			name: "a silo that just joined takes the members it reaches for its first stable membership",
			steps: []step{
				{at: 0, reachable: "a,b,c", members: "d", stable: "a,b,c"},
				{at: time.Second, reachable: "a", members: "b,c,d", fenced: true, stable: "a,b,c", reason: "sees 1 of 3"},
			},
		},
		{
			name: "a change of the reachable members restarts the stability period",
			steps: []step{
				{at: 0, reachable: "a,b", stable: "a,b"},
				{at: 5 * time.Second, reachable: "a,b,c", stable: "a,b"},
				{at: period, reachable: "a,b,c", stable: "a,b"},
				{at: 15 * time.Second, reachable: "a,b,c", stable: "a,b,c"},
			},
		},
		{
			name: "a leave before the first observation changes nothing",
			steps: []step{
				{at: 0, left: "b", stable: ""},
				{at: time.Second, reachable: "a,b", stable: "a,b"},
			},
		},
		{
			name:    "a silo cut off from both others fences at once and cannot shrink the membership",
			initial: "a,b,c",
			steps: []step{
				{at: 11 * time.Second, reachable: "a", members: "b,c", fenced: true, stable: "a,b,c",
					reason: "sees 1 of 3 silos of the last stable membership: b, c unreachable"},
				{at: time.Hour, reachable: "a", fenced: true, stable: "a,b,c", reason: "b, c unreachable"},
			},
		},
		{
			name:    "members missing from the observation count as unreachable",
			initial: "a,b,c",
			steps: []step{
				{at: 11 * time.Second, reachable: "", fenced: true, stable: "a,b,c", reason: "sees 1 of 3"},
			},
		},
		{
			name:    "the fenced silo serves again once it reaches a majority",
			initial: "a,b,c",
			steps: []step{
				{at: 11 * time.Second, reachable: "a", members: "b,c", fenced: true, stable: "a,b,c"},
				{at: 20 * time.Second, reachable: "a,c", members: "b", stable: "a,b,c"},
				{at: 29 * time.Second, reachable: "a,c", members: "b", stable: "a,b,c"},
				{at: 30 * time.Second, reachable: "a,c", members: "b", stable: "a,c"},
			},
		},
		{
			name:    "the survivors of a crash shrink the membership after the stability period, and then the fence is off",
			initial: "a,b,c",
			steps: []step{
				{at: 11 * time.Second, reachable: "a,b", members: "c", stable: "a,b,c"},
				{at: 21 * time.Second, reachable: "a,b", stable: "a,b"},
				{at: 22 * time.Second, reachable: "a", stable: "a,b"},
			},
		},
		{
			name:    "a flapping member keeps the membership as it is",
			initial: "a,b,c",
			steps: []step{
				{at: 11 * time.Second, reachable: "a,b", stable: "a,b,c"},
				{at: 16 * time.Second, reachable: "a,b,c", stable: "a,b,c"},
				{at: 20 * time.Second, reachable: "a,b", stable: "a,b,c"},
				{at: 29 * time.Second, reachable: "a,b", stable: "a,b,c"},
				{at: 30 * time.Second, reachable: "a,b", stable: "a,b"},
			},
		},
		{
			name:    "a restarted member rejoins the membership",
			initial: "a,b",
			steps: []step{
				{at: 11 * time.Second, reachable: "a,b,c", stable: "a,b"},
				{at: 21 * time.Second, reachable: "a,b,c", stable: "a,b,c"},
				{at: 22 * time.Second, reachable: "a", members: "b,c", fenced: true, stable: "a,b,c"},
			},
		},
		{
			name:    "a graceful leave shrinks the membership at once",
			initial: "a,b,c",
			steps: []step{
				{at: 11 * time.Second, left: "c", stable: "a,b"},
				{at: 12 * time.Second, reachable: "a", members: "b", stable: "a,b"},
			},
		},
		{
			name:    "a leave can give back the majority",
			initial: "a,b,c,d,e",
			steps: []step{
				{at: 11 * time.Second, reachable: "a,b", fenced: true, stable: "a,b,c,d,e", reason: "sees 2 of 5"},
				{at: 12 * time.Second, left: "e", fenced: true, stable: "a,b,c,d"},
				{at: 13 * time.Second, left: "d", stable: "a,b,c"},
				{at: 14 * time.Second, reachable: "a,b", stable: "a,b,c"},
				{at: 22 * time.Second, reachable: "a,b", stable: "a,b,c"},
				{at: 23 * time.Second, reachable: "a,b", stable: "a,b"},
			},
		},
		{
			name:    "this silo never leaves its own membership",
			initial: "a,b,c",
			steps: []step{
				{at: 11 * time.Second, left: "a", stable: "a,b,c"},
			},
		},
		{
			name:    "half of an even membership is no majority",
			initial: "a,b,c,d",
			steps: []step{
				{at: 11 * time.Second, reachable: "a,b", members: "c,d", fenced: true, stable: "a,b,c,d", reason: "c, d unreachable"},
				{at: 12 * time.Second, reachable: "a,b,c", members: "d", stable: "a,b,c,d"},
			},
		},
		{
			name:    "a pair fences only when asked to",
			initial: "a,b",
			steps: []step{
				{at: 11 * time.Second, reachable: "a", members: "b", stable: "a,b"},
			},
		},
		{
			name:    "with MinSilos 2, each of a pair fences when it loses the other",
			min:     2,
			initial: "a,b",
			steps: []step{
				{at: 11 * time.Second, reachable: "a", members: "b", fenced: true, stable: "a,b", reason: "sees 1 of 2"},
				{at: time.Hour, reachable: "a", fenced: true, stable: "a,b"},
			},
		},
		{
			name:    "a new member seen while fenced does not count towards the majority",
			initial: "a,b,c",
			steps: []step{
				{at: 11 * time.Second, reachable: "a,d,e", members: "b,c", fenced: true, stable: "a,b,c"},
				{at: time.Hour, reachable: "a,d,e", fenced: true, stable: "a,b,c"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f *Fence
			if tc.initial == "" {
				f = New(Options{Self: "a", MinSilos: tc.min, Stability: period})
			} else {
				f = stableAfter(t, tc.min, tc.initial)
			}
			fenced := false
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				var st Status
				if s.left != "" {
					st = f.Left(now, s.left)
				} else {
					st = f.Observe(now, observations(s.reachable, s.members))
				}
				assert.Equal(t, s.fenced, st.Fenced, "step %d: fenced", i)
				assert.Equal(t, s.fenced != fenced, st.Changed, "step %d: changed", i)
				assert.Equal(t, split(s.stable), st.Stable, "step %d: stable", i)
				if s.fenced {
					assert.Contains(t, st.Reason, s.reason, "step %d", i)
				} else {
					assert.Empty(t, st.Reason, "step %d", i)
				}
				fenced = s.fenced
			}
		})
	}
}

// naive is the fence's rule recomputed from the whole history at every
// step, with none of Fence's incremental bookkeeping: the stable membership
// becomes the reachable set once the latest run of identical observations
// (during all of which a majority of the stable membership was reached)
// lasts the stability period.
type naive struct {
	self, min int
	history   []naiveEvent
}

type naiveEvent struct {
	at        time.Time
	reachable []bool // by member index; nil for a leave
	left      int
}

func (n *naive) verdict(members int, stability time.Duration) (fenced bool, stable []bool) {
	stable = make([]bool, members) // empty
	majority := func(reach []bool) bool {
		total, got := 0, 0
		for i, in := range stable {
			if in {
				total++
				if reach[i] || i == n.self {
					got++
				}
			}
		}
		return total == 0 || 2*got > total
	}
	var current []bool // the latest observation, self included, leaves applied
	runStart := -1     // index of the event that started the current run
	for i, e := range n.history {
		if e.reachable == nil {
			if e.left != n.self {
				before := current != nil && majority(current)
				stable[e.left] = false
				if current != nil {
					current = slices.Clone(current)
					current[e.left] = false
					if !before && majority(current) {
						runStart = i
					}
				}
			}
		} else {
			obs := slices.Clone(e.reachable)
			obs[n.self] = true
			if current == nil {
				stable = slices.Clone(obs)
			}
			before := current != nil && majority(current)
			if current == nil || !slices.Equal(obs, current) {
				runStart = i
			}
			current = obs
			if !before && majority(current) {
				runStart = i
			}
		}
		if current == nil || !majority(current) {
			continue
		}
		if e.at.Sub(n.history[runStart].at) >= stability && !slices.Equal(stable, current) {
			stable = slices.Clone(current)
		}
	}
	count := 0
	for _, in := range stable {
		if in {
			count++
		}
	}
	return count >= n.min && current != nil && !majority(current), stable
}

// TestFenceAgreesWithANaiveModel feeds random observations and leaves to
// the fence and to the naive model and compares their verdicts.
func TestFenceAgreesWithANaiveModel(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e"}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		members := 3 + rng.IntN(3)
		min := 1 + rng.IntN(4)
		stability := time.Duration(1+rng.IntN(5)) * time.Second
		f := New(Options{Self: "a", MinSilos: min, Stability: stability})
		model := &naive{self: 0, min: min}
		now := t0
		reach := make([]bool, members)
		for i := range reach {
			reach[i] = true
		}
		for step := range 60 {
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
			var st Status
			if rng.IntN(12) == 0 {
				left := rng.IntN(members)
				model.history = append(model.history, naiveEvent{at: now, left: left})
				st = f.Left(now, ids[left])
			} else {
				if rng.IntN(3) == 0 { // change what is reachable, else observe the same again
					reach[rng.IntN(members)] = rng.IntN(2) == 0
				}
				model.history = append(model.history, naiveEvent{at: now, reachable: slices.Clone(reach)})
				var obs []Observation
				for i, r := range reach {
					if rng.IntN(4) != 0 || r { // unreachable members are sometimes left out
						obs = append(obs, Observation{ID: ids[i], Reachable: r})
					}
				}
				st = f.Observe(now, obs)
			}
			fenced, stable := model.verdict(members, stability)
			var want []string
			for i, in := range stable {
				if in {
					want = append(want, ids[i])
				}
			}
			require.Equal(t, want, st.Stable, "seed %d step %d: stable membership\n%s", seed, step, model)
			require.Equal(t, fenced, st.Fenced, "seed %d step %d: fenced (stable %v)", seed, step, st.Stable)
		}
	}
}

// String lists the history, for a failure's message.
func (n *naive) String() string {
	var b strings.Builder
	for _, e := range n.history {
		if e.reachable == nil {
			fmt.Fprintf(&b, "%v left %d\n", e.at.Sub(t0), e.left)
		} else {
			fmt.Fprintf(&b, "%v reach %v\n", e.at.Sub(t0), e.reachable)
		}
	}
	return b.String()
}
