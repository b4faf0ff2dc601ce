package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Granary is the name of granary's rows; every other system is a peer.
const Granary = "granary"

// caseKey identifies a case of one system: the rows of its repetitions.
type caseKey struct {
	System string
	Case
}

// group is the rows of one case of one system.
type group struct {
	key  caseKey
	rows []Result
}

// groupRows groups rows by system and case, in the order cases first
// appear.
func groupRows(rows []Result) []*group {
	var groups []*group
	index := make(map[caseKey]*group)
	for _, r := range rows {
		k := caseKey{System: r.System, Case: r.Case()}
		g, ok := index[k]
		if !ok {
			g = &group{key: k}
			index[k] = g
			groups = append(groups, g)
		}
		g.rows = append(g.rows, r)
	}
	return groups
}

// bySystem orders groups by system, each system where it first appears,
// keeping the order of each system's cases: the run interleaves systems.
func bySystem(groups []*group) []*group {
	var systems []string
	for _, g := range groups {
		if !slices.Contains(systems, g.key.System) {
			systems = append(systems, g.key.System)
		}
	}
	sorted := slices.Clone(groups)
	slices.SortStableFunc(sorted, func(a, b *group) int {
		return slices.Index(systems, a.key.System) - slices.Index(systems, b.key.System)
	})
	return sorted
}

// median returns the median of what f takes from each row (the mean of the
// middle two for an even count).
func median(rows []Result, f func(*Result) float64) float64 {
	if len(rows) == 0 {
		return 0
	}
	v := make([]float64, len(rows))
	for i := range rows {
		v[i] = f(&rows[i])
	}
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func opsPerSecond(r *Result) float64 { return r.OpsPerSecond }
func p50(r *Result) float64          { return r.P50Ms }
func p99(r *Result) float64          { return r.P99Ms }
func bytesPerOp(r *Result) float64   { return r.AllocatedBytesPerOp }
func mallocsPerOp(r *Result) float64 { return r.MallocsPerOp }
func retained(r *Result) float64     { return float64(r.RetainedBytesDelta) }

// WriteTable prints the report for a reader: every case's medians over its
// repetitions, then each granary figure as a ratio to each peer figure of
// the same run, then the notes and failures.
func (rep *Report) WriteTable(w io.Writer) error {
	groups := bySystem(groupRows(rep.Results))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\talgorithm\tscenario\tcontext\treps\tops/s\tp50 µs\tp99 µs\tB/op\tallocs/op\tretained B\t")
	for _, g := range groups {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%.1f\t%.1f\t%.0f\t%.1f\t%+.0f\t\n",
			g.key.System, g.key.Algorithm, g.key.Scenario, overloadName(g.key.Cancellable), len(g.rows),
			humanCount(median(g.rows, opsPerSecond)), 1000*median(g.rows, p50), 1000*median(g.rows, p99),
			median(g.rows, bytesPerOp), median(g.rows, mallocsPerOp), median(g.rows, retained))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeRatios(w, groups); err != nil {
		return err
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	for _, f := range rep.Failures {
		fmt.Fprintln(w, "FAILED:", f)
	}
	return nil
}

// writeRatios prints granary's median ops/s over each peer's, case by
// case. A peer figure is the peer's same scenario under the same overload;
// for a cancellable case of a peer whose calls take no context it is the
// peer's non-cancellable figure, marked with *.
func writeRatios(w io.Writer, groups []*group) error {
	var peers []string
	var ours []*group
	for _, g := range groups {
		if g.key.System == Granary {
			ours = append(ours, g)
		} else if !slices.Contains(peers, g.key.System) {
			peers = append(peers, g.key.System)
		}
	}
	if len(peers) == 0 || len(ours) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "granary ops/s as a ratio to each peer's, same run, same scenario (* the peer's calls take no context: its context.Background() figure):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "algorithm\tscenario\tcontext\t%s\t\n", strings.Join(peers, "\t"))
	for _, g := range ours {
		fmt.Fprintf(tw, "%s\t%s\t%s\t", g.key.Algorithm, g.key.Scenario, overloadName(g.key.Cancellable))
		for _, p := range peers {
			fmt.Fprintf(tw, "%s\t", ratioCell(g, peerFigure(groups, p, g.key.Case)))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// peerFigure returns peer's group for the scenario and overload of c, or
// its non-cancellable group when it has no cancellable one (marked), or
// nil.
func peerFigure(groups []*group, peer string, c Case) *peerGroup {
	var fallback *group
	for _, g := range groups {
		if g.key.System != peer || g.key.Scenario != c.Scenario {
			continue
		}
		if g.key.Cancellable == c.Cancellable {
			return &peerGroup{group: g}
		}
		if !g.key.Cancellable {
			fallback = g
		}
	}
	if fallback != nil && !hasCancellable(groups, peer) {
		return &peerGroup{group: fallback, substituted: true}
	}
	return nil
}

type peerGroup struct {
	*group
	substituted bool
}

func hasCancellable(groups []*group, peer string) bool {
	return slices.ContainsFunc(groups, func(g *group) bool { return g.key.System == peer && g.key.Cancellable })
}

func ratioCell(ours *group, peer *peerGroup) string {
	if peer == nil {
		return "-"
	}
	theirs := median(peer.rows, opsPerSecond)
	if theirs == 0 {
		return "-"
	}
	cell := fmt.Sprintf("%.2f", median(ours.rows, opsPerSecond)/theirs)
	if peer.substituted {
		cell += "*"
	}
	return cell
}

// humanCount prints n with a k or M suffix.
func humanCount(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}
