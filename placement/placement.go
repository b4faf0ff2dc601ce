package placement

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/ring"
)

// ErrNoCandidates is returned by Place when there is no silo to place on.
var ErrNoCandidates = errors.New("placement: no candidate silos")

// ErrBadPick is returned by Place when a Strategy picks an index outside the
// candidates.
var ErrBadPick = errors.New("placement: strategy picked no candidate")

// Candidate is a silo that may host a new activation, with the load figure it
// last published (its activation count).
type Candidate struct {
	// Silo is the silo's id.
	Silo string
	// Load is the silo's published activation count.
	Load int64
}

// Request is everything a strategy may base its choice on. Placement is a
// pure function of it: the same Request (with a random source in the same
// state) gives the same silo.
type Request struct {
	// Grain is the grain to place.
	Grain actor.GrainID
	// Candidates are the live silos that may host it, as the caller's
	// membership view has them (typically every active silo). The order
	// matters only to strategies that draw at random, for reproducibility.
	Candidates []Candidate
	// Local is the id of the silo that is placing, or "" when the caller is
	// not a silo.
	Local string
	// Hint, when not "", is the silo the caller asked for. Place honours it
	// when it is among the candidates and ignores it otherwise.
	Hint string
	// Rand is the random source of the strategies that draw. Nil means the
	// math/rand/v2 top-level functions (safe for concurrent use); a *rand.Rand
	// is not, so give each goroutine its own.
	Rand *rand.Rand
}

// intN draws uniformly from [0, n).
func (r *Request) intN(n int) int {
	if r.Rand != nil {
		return r.Rand.IntN(n)
	}
	return rand.IntN(n)
}

// Strategy chooses the silo for a new activation.
type Strategy interface {
	// Pick returns the index in req.Candidates of the chosen silo. Place
	// calls it only with at least one candidate and only when no live hint
	// decided already.
	Pick(req *Request) int
}

// Place returns the silo that should host a new activation of req.Grain: the
// hinted silo when it is a candidate, otherwise the one strategy picks. It
// returns ErrNoCandidates when there are none.
func Place(strategy Strategy, req *Request) (string, error) {
	if len(req.Candidates) == 0 {
		return "", ErrNoCandidates
	}
	if req.Hint != "" {
		if i := indexOf(req.Candidates, req.Hint); i >= 0 {
			return req.Hint, nil
		}
	}
	i := strategy.Pick(req)
	if i < 0 || i >= len(req.Candidates) {
		return "", fmt.Errorf("%w: %T picked %d of %d", ErrBadPick, strategy, i, len(req.Candidates))
	}
	return req.Candidates[i].Silo, nil
}

func indexOf(cs []Candidate, silo string) int {
	for i, c := range cs {
		if c.Silo == silo {
			return i
		}
	}
	return -1
}

// Random places uniformly at random over the candidates.
type Random struct{}

// Pick draws a candidate uniformly.
func (Random) Pick(req *Request) int { return req.intN(len(req.Candidates)) }

// PreferLocal places on the placing silo when it is a candidate, and at
// random otherwise (a client placing, or a local silo that is not accepting
// activations).
type PreferLocal struct{}

// Pick returns the local silo, or a random candidate.
func (PreferLocal) Pick(req *Request) int {
	if req.Local != "" {
		if i := indexOf(req.Candidates, req.Local); i >= 0 {
			return i
		}
	}
	return Random{}.Pick(req)
}

// HashBased places by rendezvous hashing: each candidate gets a weight
// hashed from the grain and the silo, and the heaviest wins. The choice
// depends only on the grain and the set of candidates, so it is the same on
// every silo for a fixed membership; when a silo leaves, only the grains
// that were placed on it move, and a silo that joins takes roughly its
// share from every other.
type HashBased struct{}

// Pick returns the candidate with the highest rendezvous weight.
func (HashBased) Pick(req *Request) int {
	g := ring.Hash(req.Grain)
	best, bestWeight := 0, uint64(0)
	for i, c := range req.Candidates {
		w := ring.Mix(g, ring.HashSilo(c.Silo))
		// Equal weights (practically never) go to the lower silo id, so
		// the order of the candidates never matters.
		if i == 0 || w > bestWeight || w == bestWeight && c.Silo < req.Candidates[best].Silo {
			best, bestWeight = i, w
		}
	}
	return best
}

// DefaultChoices is the number of silos ActivationCount compares when its
// Choices is zero.
const DefaultChoices = 2

// ActivationCount places by the power of d choices over published load: it
// draws Choices distinct candidates at random and takes the least loaded.
// Comparing two random silos instead of all of them keeps silos that place
// at the same time from herding onto the one least-loaded silo their
// (equally stale) figures show, while still spreading load nearly as evenly.
// Callers that place many grains between two load publications should add
// their own placements since the last publication to Candidate.Load.
type ActivationCount struct {
	// Choices is how many candidates are compared; zero means
	// DefaultChoices. More choices balance harder and herd more.
	Choices int
}

// Pick returns the least loaded of Choices distinct random candidates; ties
// go to the first drawn. When Choices is at least half the candidates it
// compares them all.
func (s ActivationCount) Pick(req *Request) int {
	n := len(req.Candidates)
	d := s.Choices
	if d <= 0 {
		d = DefaultChoices
	}
	if 2*d >= n {
		return leastLoaded(req, n)
	}
	// Rejection sampling: with fewer than half the candidates drawn, a draw
	// repeats with probability below one half.
	var buf [DefaultChoices * 4]int
	drawn := buf[:0]
	best := -1
	for len(drawn) < d {
		i := req.intN(n)
		if slices.Contains(drawn, i) {
			continue
		}
		drawn = append(drawn, i)
		if best < 0 || req.Candidates[i].Load < req.Candidates[best].Load {
			best = i
		}
	}
	return best
}

// leastLoaded returns the least loaded candidate, starting the scan at a
// random offset so that ties do not always go to the same silo.
func leastLoaded(req *Request, n int) int {
	start := req.intN(n)
	best := start
	for k := 1; k < n; k++ {
		i := (start + k) % n
		if req.Candidates[i].Load < req.Candidates[best].Load {
			best = i
		}
	}
	return best
}
