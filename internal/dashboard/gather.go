package dashboard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/granary-go/granary/actor"
	dpb "github.com/granary-go/granary/internal/dashboard/dashboardpb"
	"github.com/granary-go/granary/internal/silohost"
	"github.com/granary-go/granary/proxy"
)

// Bounds of a silo's answer. An answer above maxAnswerBytes is refused
// before it is decoded; one that breaks another bound is refused whole.
// A real part is a few kilobytes: a line per grain type and per method.
const (
	maxAnswerBytes = 1 << 20
	maxTypes       = 4096
	maxMethods     = 4096
	maxOutcomes    = 16
	maxBuckets     = 64
	maxHottest     = 1000
	maxNameBytes   = 512  // a grain type, a method, an outcome, a silo
	maxKeyBytes    = 4096 // as the gateway's default -max-key-length
	maxErrorBytes  = 1024
)

// ErrBadAnswer is wrapped by the reason a silo's part is refused.
var ErrBadAnswer = errors.New("dashboard: bad answer")

// Snapshot is what the page shows, as the JSON of SnapshotPath: the
// cluster as this silo sees it, and each silo's own part as it answered.
type Snapshot struct {
	// Self is this silo's name; Time when the snapshot was built.
	Self string    `json:"self"`
	Time time.Time `json:"time"`
	// Version is the membership view's version; Members as /cluster.
	Version uint64   `json:"version"`
	Members []Member `json:"members"`
	// Silos are the members' own parts, sorted by name as Members: what
	// each said of itself, or why it did not.
	Silos []SiloPart `json:"silos"`
	// Activations are the cluster's, by grain type (sorted), with each
	// silo's count.
	Activations []TypeActivations `json:"activations"`
	// Calls are the grain calls of the silos that answered, by type and
	// method, from their instruments; empty without them.
	Calls []MethodCalls `json:"calls"`
	// Limiters are the totals of the limiter grains of the silos that
	// answered, absent when none has them registered.
	Limiters *LimiterTotals `json:"limiters,omitempty"`
	// Keys are the cluster's hottest limiter keys, on the admin port only.
	Keys *KeyTable `json:"keys,omitempty"`
}

// SiloPart is what one silo said of itself.
type SiloPart struct {
	Name string `json:"name"`
	// Answered says whether the silo's part is in the snapshot; Error
	// says why not: no answer within Options.PeerTimeout, no dashboard
	// there, an answer refused.
	Answered bool   `json:"answered"`
	Error    string `json:"error,omitempty"`
	// Generation is the incarnation that answered, as Member's.
	Generation string `json:"generation,omitempty"`
	// Built is when the silo built its part, which it shares for up to
	// its MinInterval.
	Built *time.Time `json:"built,omitempty"`
	// Activations counts its activations; Calls its grain calls since it
	// started, by its instruments.
	Activations int64  `json:"activations"`
	Calls       uint64 `json:"calls"`
	// Limiters are its limiter grains' totals, if it has them.
	Limiters *LimiterTotals `json:"limiters,omitempty"`
}

// TypeActivations are the activations of a grain type: in all, and on
// each silo that has any, by name.
type TypeActivations struct {
	Type  string           `json:"type"`
	Count int64            `json:"count"`
	Silos map[string]int64 `json:"silos"`
}

// LimiterTotals are ratelimit.SiloStats: what limiter grains answered to
// acquisitions since their silos started.
type LimiterTotals struct {
	Granted   uint64 `json:"granted"`
	Rejected  uint64 `json:"rejected"`
	Queued    uint64 `json:"queued"`
	Expired   uint64 `json:"expired"`
	Cancelled uint64 `json:"cancelled"`
	Waiting   int64  `json:"waiting"`
}

func (t *LimiterTotals) add(w *dpb.LimiterTotals) {
	t.Granted = addCapped(t.Granted, w.Granted)
	t.Rejected = addCapped(t.Rejected, w.Rejected)
	t.Queued = addCapped(t.Queued, w.Queued)
	t.Expired = addCapped(t.Expired, w.Expired)
	t.Cancelled = addCapped(t.Cancelled, w.Cancelled)
	t.Waiting = addCappedInt(t.Waiting, w.Waiting)
}

// Snapshot builds a snapshot of the cluster now, whatever MinInterval
// says of the page: it asks every other member of the view for its part,
// in parallel, each within PeerTimeout (their parts, and this silo's, are
// still shared for MinInterval). showKeys adds the hottest keys.
func (d *Dashboard) Snapshot(ctx context.Context, showKeys bool) Snapshot {
	v := d.view()
	snap := Snapshot{Self: v.Self, Time: d.now().UTC(), Version: v.Version, Members: MembersOf(v)}
	parts := make([]*dpb.SnapshotReply, len(v.Members))
	errs := make([]error, len(v.Members))
	var wg sync.WaitGroup
	self := -1
	for i, m := range v.Members {
		if m.ID == v.Self {
			self = i
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, d.opts.PeerTimeout)
			defer cancel()
			parts[i], errs[i] = d.ask(ctx, m.ID, showKeys)
		})
	}
	if self >= 0 { // while the others answer
		parts[self], errs[self] = d.part(ctx, showKeys)
	}
	wg.Wait()
	answered := parts[:0:0]
	for i, m := range v.Members {
		sp := SiloPart{Name: m.ID}
		p, err := parts[i], errs[i]
		if err == nil && p.GetSilo() != m.ID {
			err = fmt.Errorf("%w: silo %q answered for %s", ErrBadAnswer, p.GetSilo(), m.ID)
		}
		if err != nil {
			sp.Error = truncate(err.Error(), maxErrorBytes)
			snap.Silos = append(snap.Silos, sp)
			continue
		}
		if !showKeys {
			p = withoutKeys(p) // whatever a silo sent: the public page shows none
		}
		answered = append(answered, p)
		sp.Answered, sp.Generation = true, strconv.FormatInt(p.Generation, 10)
		built := time.Unix(0, p.BuiltUnixNano).UTC()
		sp.Built = &built
		for _, a := range p.Activations {
			sp.Activations = addCappedInt(sp.Activations, a.Count)
		}
		for _, c := range p.Calls {
			for _, o := range c.Outcomes {
				sp.Calls = addCapped(sp.Calls, o.Count)
			}
		}
		if p.Limiters != nil {
			sp.Limiters = &LimiterTotals{}
			sp.Limiters.add(p.Limiters)
		}
		snap.Silos = append(snap.Silos, sp)
	}
	snap.Activations = mergeActivations(answered)
	snap.Calls = mergeCalls(answered)
	for _, p := range answered {
		if p.Limiters != nil {
			if snap.Limiters == nil {
				snap.Limiters = &LimiterTotals{}
			}
			snap.Limiters.add(p.Limiters)
		}
	}
	if showKeys {
		snap.Keys = d.mergeKeys(answered)
	}
	return snap
}

func withoutKeys(p *dpb.SnapshotReply) *dpb.SnapshotReply {
	if p.Keys == nil {
		return p
	}
	return &dpb.SnapshotReply{Silo: p.Silo, Generation: p.Generation, BuiltUnixNano: p.BuiltUnixNano,
		Activations: p.Activations, Calls: p.Calls, Limiters: p.Limiters}
}

func mergeActivations(parts []*dpb.SnapshotReply) []TypeActivations {
	byType := map[string]*TypeActivations{}
	for _, p := range parts {
		for _, a := range p.Activations {
			t := byType[a.Type]
			if t == nil {
				t = &TypeActivations{Type: a.Type, Silos: map[string]int64{}}
				byType[a.Type] = t
			}
			t.Count = addCappedInt(t.Count, a.Count)
			t.Silos[p.Silo] = addCappedInt(t.Silos[p.Silo], a.Count)
		}
	}
	out := make([]TypeActivations, 0, len(byType))
	for _, t := range byType {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b TypeActivations) int { return cmp.Compare(a.Type, b.Type) })
	return out
}

// mergeKeys lists the hottest of every silo's hottest keys.
func (d *Dashboard) mergeKeys(parts []*dpb.SnapshotReply) *KeyTable {
	table := &KeyTable{Hottest: []Key{}}
	for _, p := range parts {
		if p.Keys == nil {
			continue
		}
		table.Active = addCappedInt(table.Active, p.Keys.Active)
		table.Asked = addCappedInt(table.Asked, p.Keys.Asked)
		for _, k := range p.Keys.Hottest {
			table.Hottest = append(table.Hottest, keyOfWire(p.Silo, k))
		}
	}
	slices.SortFunc(table.Hottest, hotter)
	table.Hottest = table.Hottest[:min(len(table.Hottest), d.opts.Hottest)]
	return table
}

// askPeer asks the silo named peer for its part over the link to it.
func (d *Dashboard) askPeer(ctx context.Context, peer string, keys bool) (*dpb.SnapshotReply, error) {
	c, err := silohost.PeerCaller(ctx, d.silo, peer)
	if err != nil {
		return nil, err
	}
	timeout := d.opts.PeerTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("dashboard: %w", context.DeadlineExceeded)
	}
	in := &dpb.SnapshotRequest{Keys: keys, Hottest: int32(d.opts.Hottest)}
	out := boundedAnswer{new(dpb.SnapshotReply)}
	err = proxy.NewRef(c, dpb.StatsGrainType, "").Invoke(ctx, dpb.Stats_Snapshot_Method, in, out, proxy.WithTimeout(timeout))
	if err != nil {
		return nil, err
	}
	if err := checkAnswer(out.SnapshotReply, keys, d.opts.Hottest); err != nil {
		return nil, err
	}
	return out.SnapshotReply, nil
}

// boundedAnswer is a silo's answer, refused above maxAnswerBytes before
// it is decoded.
type boundedAnswer struct{ *dpb.SnapshotReply }

var _ proxy.WireMessage = boundedAnswer{}

// MergeGranaryWire implements proxy.WireMessage.
func (a boundedAnswer) MergeGranaryWire(b []byte) error {
	if len(b) > maxAnswerBytes {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrBadAnswer, len(b), maxAnswerBytes)
	}
	return a.SnapshotReply.MergeGranaryWire(b)
}

// decodeAnswer decodes and checks a silo's encoded answer, as askPeer
// does: for the fuzz target.
func decodeAnswer(b []byte, keys bool, hottest int) (*dpb.SnapshotReply, error) {
	out := boundedAnswer{new(dpb.SnapshotReply)}
	if err := proxy.UnmarshalFresh(b, out); err != nil {
		return nil, err
	}
	if err := checkAnswer(out.SnapshotReply, keys, hottest); err != nil {
		return nil, err
	}
	return out.SnapshotReply, nil
}

// checkAnswer refuses a part that breaks a bound: too many entries, names
// too long, counts negative, buckets out of order, a number that is not
// finite, keys not asked for.
func checkAnswer(p *dpb.SnapshotReply, keys bool, hottest int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadAnswer, fmt.Sprintf(format, args...))
	}
	name := func(what, s string, limit int) error {
		if len(s) > limit || !utf8.ValidString(s) {
			return bad("%s of %d bytes", what, len(s))
		}
		return nil
	}
	if err := name("silo", p.Silo, maxNameBytes); err != nil {
		return err
	}
	if len(p.Activations) > maxTypes {
		return bad("%d grain types", len(p.Activations))
	}
	for _, a := range p.Activations {
		if err := name("grain type", a.Type, maxNameBytes); err != nil {
			return err
		}
		if a.Count < 0 {
			return bad("%d activations", a.Count)
		}
	}
	if len(p.Calls) > maxMethods {
		return bad("%d methods", len(p.Calls))
	}
	for _, c := range p.Calls {
		if err := errors.Join(name("grain type", c.Type, maxNameBytes), name("method", c.Method, maxNameBytes)); err != nil {
			return err
		}
		if len(c.Outcomes) > maxOutcomes {
			return bad("%d outcomes", len(c.Outcomes))
		}
		for _, o := range c.Outcomes {
			if err := name("outcome", o.Outcome, maxNameBytes); err != nil {
				return err
			}
		}
		if math.IsNaN(c.SecondsSum) || math.IsInf(c.SecondsSum, 0) || c.SecondsSum < 0 {
			return bad("%v seconds", c.SecondsSum)
		}
		if len(c.Bounds) > maxBuckets || len(c.Bounds) != len(c.Cumulative) {
			return bad("%d bounds, %d counts", len(c.Bounds), len(c.Cumulative))
		}
		for i, b := range c.Bounds {
			if math.IsNaN(b) || math.IsInf(b, 0) || b < 0 || i > 0 && b <= c.Bounds[i-1] {
				return bad("bucket bounds %v", c.Bounds)
			}
			if i > 0 && c.Cumulative[i] < c.Cumulative[i-1] || c.Cumulative[i] > c.Timed {
				return bad("bucket counts %v of %d", c.Cumulative, c.Timed)
			}
		}
	}
	if l := p.Limiters; l != nil && l.Waiting < 0 {
		return bad("%d waiting", l.Waiting)
	}
	if p.Keys == nil {
		return nil
	}
	if !keys {
		return bad("keys not asked for")
	}
	if len(p.Keys.Hottest) > hottest || p.Keys.Active < 0 || p.Keys.Asked < 0 {
		return bad("%d keys of %d asked", len(p.Keys.Hottest), hottest)
	}
	for _, k := range p.Keys.Hottest {
		if _, ok := algorithmNames[k.Algorithm]; !ok {
			return bad("algorithm %q", truncate(k.Algorithm, maxNameBytes))
		}
		if err := errors.Join(name("key", k.Key, maxKeyBytes), name("error", k.Error, maxErrorBytes)); err != nil {
			return err
		}
		if k.Limit < 0 {
			return bad("limit %d", k.Limit)
		}
	}
	return nil
}

// algorithmNames are the algorithms a key may name.
var algorithmNames = func() map[string]bool {
	out := map[string]bool{}
	for _, a := range algorithms {
		out[a.name] = true
	}
	return out
}()

func addCappedInt(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// activeGrains lists the grains active on the silo; none before it
// started.
func (d *Dashboard) activeGrains() []actor.GrainID {
	h := silohost.Host(d.silo)
	if h == nil {
		return nil
	}
	return h.Active()
}
