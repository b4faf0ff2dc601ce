package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
)

// The sides of a revision comparison, as compare.sh names its reports:
// NN-base.json and NN-head.json.
const (
	SideBase = "base"
	SideHead = "head"
)

// LoadSides reads the reports of a revision comparison: every *.json file
// named in paths or inside a directory named there, each put on the side
// its name ends with (-base.json or -head.json). It refuses, rather than
// drops, a report that failed or holds a row with failed operations.
func LoadSides(paths []string) (map[string][]Result, error) {
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		found, err := filepath.Glob(filepath.Join(p, "*.json"))
		if err != nil {
			return nil, err
		}
		files = append(files, found...)
	}
	sides := make(map[string][]Result)
	for _, f := range files {
		side, err := sideOf(f)
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var rep Report
		if err := json.Unmarshal(data, &rep); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrBadReport, f, err)
		}
		if len(rep.Failures) > 0 {
			return nil, fmt.Errorf("%w: %s: the run failed: %s", ErrBadReport, f, rep.Failures[0])
		}
		for _, r := range rep.Results {
			if r.SuccessfulOperations != r.Operations || r.Topology == "" || r.Revision == "" {
				return nil, fmt.Errorf("%w: %s: %s %s repetition %d: %d of %d operations succeeded, topology %q, revision %q",
					ErrBadReport, f, r.System, r.Case(), r.Repetition, r.SuccessfulOperations, r.Operations, r.Topology, r.Revision)
			}
		}
		sides[side] = append(sides[side], rep.Results...)
	}
	if len(sides) == 0 {
		return nil, fmt.Errorf("%w: no reports in %v", ErrBadReport, paths)
	}
	return sides, nil
}

func sideOf(file string) (string, error) {
	name := strings.TrimSuffix(filepath.Base(file), ".json")
	for _, side := range []string{SideBase, SideHead} {
		if strings.HasSuffix(name, "-"+side) {
			return side, nil
		}
	}
	return "", fmt.Errorf("%w: %s: the name ends in neither -%s.json nor -%s.json", ErrBadReport, file, SideBase, SideHead)
}

// WriteComparison prints, case by case, the medians of ops/s, p99 and
// bytes per operation of base and head over all their samples, the sample
// counts and the change in ops/s. It drops no sample and applies no
// threshold: every case either side measured is printed.
func WriteComparison(w io.Writer, base, head []Result) error {
	baseGroups, headGroups := groupRows(base), groupRows(head)
	keys := make([]caseKey, 0, len(baseGroups)+len(headGroups))
	byKey := map[string]map[caseKey][]Result{SideBase: {}, SideHead: {}}
	for side, groups := range map[string][]*group{SideBase: baseGroups, SideHead: headGroups} {
		for _, g := range groups {
			byKey[side][g.key] = g.rows
		}
	}
	for _, g := range slices.Concat(baseGroups, headGroups) {
		if !slices.Contains(keys, g.key) {
			keys = append(keys, g.key)
		}
	}
	fmt.Fprintf(w, "revisions: base %s, head %s\n", revisions(base), revisions(head))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\talgorithm\tscenario\tcontext\tn base/head\tops/s base\tops/s head\tchange\tp99 ms base -> head\tB/op base -> head\t")
	for _, k := range keys {
		b, h := byKey[SideBase][k], byKey[SideHead][k]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t\n",
			k.System, k.Algorithm, k.Scenario, overloadName(k.Cancellable), len(b), len(h),
			medianCell(b, opsPerSecond, humanCount), medianCell(h, opsPerSecond, humanCount),
			change(b, h),
			medianCell(b, p99, ms)+" -> "+medianCell(h, p99, ms),
			medianCell(b, bytesPerOp, whole)+" -> "+medianCell(h, bytesPerOp, whole))
	}
	return tw.Flush()
}

func ms(v float64) string    { return fmt.Sprintf("%.3f", v) }
func whole(v float64) string { return fmt.Sprintf("%.0f", v) }

func medianCell(rows []Result, f func(*Result) float64, format func(float64) string) string {
	if len(rows) == 0 {
		return "-"
	}
	return format(median(rows, f))
}

func change(base, head []Result) string {
	b, h := median(base, opsPerSecond), median(head, opsPerSecond)
	if len(base) == 0 || len(head) == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", (h/b-1)*100)
}

func revisions(rows []Result) string {
	var revs []string
	for _, r := range rows {
		if !slices.Contains(revs, r.Revision) {
			revs = append(revs, r.Revision)
		}
	}
	if len(revs) == 0 {
		return "-"
	}
	return strings.Join(revs, ",")
}
