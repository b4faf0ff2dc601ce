package placement

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
)

var strategies = []struct {
	name string
	s    Strategy
}{
	{"random", Random{}},
	{"prefer-local", PreferLocal{}},
	{"hash-based", HashBased{}},
	{"activation-count", ActivationCount{}},
}

func silos(ids ...string) []Candidate {
	cs := make([]Candidate, len(ids))
	for i, id := range ids {
		cs[i] = Candidate{Silo: id}
	}
	return cs
}

func grain(i int) actor.GrainID {
	return actor.GrainID{Type: "test.Counter", Key: fmt.Sprintf("key-%d", i)}
}

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

// place calls Place and fails the test on an error.
func place(t *testing.T, s Strategy, req *Request) string {
	t.Helper()
	silo, err := Place(s, req)
	require.NoError(t, err)
	return silo
}

// counts places n grains and counts them per silo; update, when not nil,
// runs after each placement (to publish loads).
func counts(t *testing.T, s Strategy, req Request, n int, update func(req *Request, silo string, i int)) map[string]int {
	t.Helper()
	out := map[string]int{}
	for i := range n {
		req.Grain = grain(i)
		silo := place(t, s, &req)
		out[silo]++
		if update != nil {
			update(&req, silo, i)
		}
	}
	return out
}

func TestPlaceWithoutCandidatesFails(t *testing.T) {
	for _, tc := range strategies {
		_, err := Place(tc.s, &Request{Grain: grain(1), Local: "a", Hint: "a"})
		assert.ErrorIs(t, err, ErrNoCandidates, tc.name)
	}
}

func TestALiveHintOverridesEveryStrategy(t *testing.T) {
	for _, tc := range strategies {
		for i := range 50 {
			req := &Request{Grain: grain(i), Candidates: silos("a", "b", "c"), Local: "a", Hint: "c", Rand: seeded(uint64(i))}
			req.Candidates[2].Load = 1 << 40 // activation-count alone would never pick c
			assert.Equal(t, "c", place(t, tc.s, req), tc.name)
		}
	}
}

func TestAHintForASiloThatIsNotLiveFallsBackToTheStrategy(t *testing.T) {
	for _, tc := range strategies {
		for i := range 50 {
			cands := silos("a", "b", "c")
			cands[0].Load = 7
			hinted := &Request{Grain: grain(i), Candidates: cands, Local: "b", Hint: "gone", Rand: seeded(uint64(i))}
			plain := &Request{Grain: grain(i), Candidates: cands, Local: "b", Rand: seeded(uint64(i))}
			assert.Equal(t, place(t, tc.s, plain), place(t, tc.s, hinted), tc.name)
		}
	}
}

// Tolerances below: n placements over k equally likely silos give each a
// binomial count with standard deviation sqrt(n(1/k)(1-1/k)); the tests
// allow about four of them, and the sources are seeded, so a failure means
// a skewed strategy, not bad luck.

func TestRandomSpreadsUniformly(t *testing.T) {
	got := counts(t, Random{}, Request{Candidates: silos("a", "b", "c"), Rand: seeded(1)}, 3000, nil)
	for _, id := range []string{"a", "b", "c"} {
		assert.InDelta(t, 1000, got[id], 100, "silo %s got %d of 3000", id, got[id]) // sd 26
	}
}

func TestPreferLocalPlacesOnTheLocalSilo(t *testing.T) {
	got := counts(t, PreferLocal{}, Request{Candidates: silos("a", "b", "c"), Local: "b", Rand: seeded(2)}, 300, nil)
	assert.Equal(t, map[string]int{"b": 300}, got)
}

func TestPreferLocalIsRandomWhenTheLocalSiloIsNotACandidate(t *testing.T) {
	for _, local := range []string{"", "shutting-down"} {
		got := counts(t, PreferLocal{}, Request{Candidates: silos("a", "b", "c"), Local: local, Rand: seeded(3)}, 3000, nil)
		for _, id := range []string{"a", "b", "c"} {
			assert.InDelta(t, 1000, got[id], 100, "local %q: silo %s got %d", local, id, got[id])
		}
	}
}

func TestHashBasedIsStableForAFixedMembership(t *testing.T) {
	base := silos("a", "b", "c", "d", "e")
	rng := seeded(4)
	for i := range 1000 {
		want := place(t, HashBased{}, &Request{Grain: grain(i), Candidates: base})
		shuffled := slices.Clone(base)
		rng.Shuffle(len(shuffled), func(x, y int) { shuffled[x], shuffled[y] = shuffled[y], shuffled[x] })
		for k := range shuffled {
			shuffled[k].Load = rng.Int64N(1000)
		}
		// Another caller: other order, other loads, another local silo and
		// its own random source; the same membership.
		got := place(t, HashBased{}, &Request{Grain: grain(i), Candidates: shuffled, Local: "c", Rand: seeded(uint64(i))})
		require.Equal(t, want, got, "grain %d", i)
	}
}

func TestHashBasedSpreadsGrains(t *testing.T) {
	got := counts(t, HashBased{}, Request{Candidates: silos("silo-0", "silo-1", "silo-2")}, 3000, nil)
	for id, n := range got {
		assert.InDelta(t, 1000, n, 100, "silo %s got %d of 3000", id, n)
	}
	assert.Len(t, got, 3)
}

func TestHashBasedMovesOnlyTheGrainsOfASiloThatLeaves(t *testing.T) {
	before := silos("a", "b", "c", "d")
	after := silos("a", "b", "d")
	moved := map[string]int{}
	for i := range 2000 {
		was := place(t, HashBased{}, &Request{Grain: grain(i), Candidates: before})
		now := place(t, HashBased{}, &Request{Grain: grain(i), Candidates: after})
		if was != "c" {
			require.Equal(t, was, now, "grain %d moved from %s, which stayed", i, was)
			continue
		}
		moved[now]++
	}
	// c's grains spread over the three that stayed (about 167 each).
	for _, id := range []string{"a", "b", "d"} {
		assert.Greater(t, moved[id], 80, "silo %s took %d of c's grains", id, moved[id])
	}
}

func TestActivationCountSpreads1000GrainsOver3Silos(t *testing.T) {
	// Each placement is published at once, as an activation count.
	publish := func(req *Request, silo string, _ int) { req.Candidates[indexOf(req.Candidates, silo)].Load++ }
	got := counts(t, ActivationCount{}, Request{Candidates: silos("a", "b", "c"), Rand: seeded(5)}, 1000, publish)
	// The power of two choices keeps the gap between the most and least
	// loaded of n silos near log(log(n)); we allow 5 grains around 333.
	for _, id := range []string{"a", "b", "c"} {
		assert.InDelta(t, 333, got[id], 5, "silo %s got %d of 1000", id, got[id])
	}
}

func TestActivationCountEvensOutLoadWithStaleFigures(t *testing.T) {
	// Silo a already hosts 300 activations. Loads are published only every
	// 100 placements, as a rate-limited membership update would; between
	// publications every silo looks as loaded as it was.
	cands := silos("a", "b", "c")
	actual := []int64{300, 0, 0}
	cands[0].Load = actual[0]
	publish := func(req *Request, silo string, i int) {
		actual[indexOf(req.Candidates, silo)]++
		if i%100 == 99 {
			for k := range req.Candidates {
				req.Candidates[k].Load = actual[k]
			}
		}
	}
	counts(t, ActivationCount{}, Request{Candidates: cands, Rand: seeded(6)}, 900, publish)
	// 1200 activations in all: 400 each when even. Random placement would
	// leave a at 600; staleness lets the last period overshoot (by up to 45
	// over 200 seeds), so we allow 60.
	for i, n := range actual {
		assert.InDelta(t, 400, n, 60, "silo %s hosts %d of 1200", cands[i].Silo, n)
	}
}

func TestActivationCountNeverPicksTheMostLoadedOfManyWithTwoChoices(t *testing.T) {
	cands := silos("a", "b", "c", "d", "e")
	cands[0].Load = 1000
	got := counts(t, ActivationCount{}, Request{Candidates: cands, Rand: seeded(7)}, 500, nil)
	assert.Zero(t, got["a"], "two distinct draws always include a less loaded silo")
	assert.Len(t, got, 4)
}

func TestActivationCountComparesAllWhenChoicesCoverThem(t *testing.T) {
	cands := silos("a", "b", "c")
	cands[0].Load, cands[1].Load, cands[2].Load = 5, 1, 9
	for _, s := range []ActivationCount{{Choices: 2}, {Choices: 3}, {Choices: 10}} {
		got := counts(t, s, Request{Candidates: cands, Rand: seeded(8)}, 100, nil)
		assert.Equal(t, map[string]int{"b": 100}, got, "choices %d", s.Choices)
	}
	one := place(t, ActivationCount{}, &Request{Grain: grain(1), Candidates: silos("only"), Rand: seeded(9)})
	assert.Equal(t, "only", one)
}

func TestActivationCountWithMoreChoicesOnALargeCluster(t *testing.T) {
	cands := silos("s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11")
	for i := range cands {
		cands[i].Load = int64(100 * i) // s0 is the least loaded
	}
	// Three choices among twelve draw distinct silos, so s11 (the most
	// loaded) and s10 never win.
	got := counts(t, ActivationCount{Choices: 3}, Request{Candidates: cands, Rand: seeded(10)}, 2000, nil)
	assert.Zero(t, got["s11"])
	assert.Zero(t, got["s10"])
	assert.Greater(t, got["s0"], got["s5"])
}

func TestPlaceUsesTheGlobalSourceWithoutRand(t *testing.T) {
	got := counts(t, Random{}, Request{Candidates: silos("a", "b")}, 400, nil)
	assert.Greater(t, got["a"], 100)
	assert.Greater(t, got["b"], 100)
}

type pickOutOfRange struct{}

func (pickOutOfRange) Pick(req *Request) int { return len(req.Candidates) }

func TestPlaceRejectsAPickOutsideTheCandidates(t *testing.T) {
	_, err := Place(pickOutOfRange{}, &Request{Grain: grain(1), Candidates: silos("a")})
	assert.ErrorIs(t, err, ErrBadPick)
}
