package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// ErrBadReport is wrapped by every problem Check finds.
var ErrBadReport = errors.New("bench: bad report")

// Expectation is what Check holds a report to.
type Expectation struct {
	// Repetitions is the number of repetitions every case must have,
	// numbered 1 to Repetitions, each once.
	Repetitions int
	// Operations is every row's operation count.
	Operations int
	// Placement names the systems whose every row must have its placement
	// verified.
	Placement []string
}

// Fields returns the JSON names of a row's fields: every row has them all.
func Fields() []string {
	t := reflect.TypeFor[Result]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	return names
}

// Check verifies a JSON report: a document {"results": [...]} without
// failures, every field in every row, every operation of every row
// successful, sane figures, every case's repetitions complete, placement
// verified where want asks. It reports every problem it finds.
func Check(doc []byte, want Expectation) error {
	var raw struct {
		Results  []map[string]json.RawMessage `json:"results"`
		Failures []string                     `json:"failures"`
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		return fmt.Errorf("%w: %w", ErrBadReport, err)
	}
	var rep Report
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return fmt.Errorf("%w: %w", ErrBadReport, err)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrBadReport}, args...)...))
	}
	if len(raw.Results) == 0 {
		bad("no results")
	}
	for _, f := range raw.Failures {
		bad("the run failed: %s", f)
	}
	for i, row := range raw.Results {
		for _, name := range Fields() {
			if _, ok := row[name]; !ok {
				bad("row %d has no %q", i, name)
			}
		}
	}
	for i := range rep.Results {
		checkRow(&rep.Results[i], i, want, bad)
	}
	for _, g := range groupRows(rep.Results) {
		seen := make(map[int]int)
		for _, r := range g.rows {
			seen[r.Repetition]++
		}
		for n := 1; n <= want.Repetitions; n++ {
			if seen[n] != 1 {
				bad("%s %s has repetition %d %d times", g.key.System, g.key.Case, n, seen[n])
			}
		}
		if len(g.rows) != want.Repetitions {
			bad("%s %s has %d rows for %d repetitions", g.key.System, g.key.Case, len(g.rows), want.Repetitions)
		}
	}
	return errors.Join(errs...)
}

func checkRow(r *Result, i int, want Expectation, bad func(string, ...any)) {
	id := fmt.Sprintf("row %d (%s %s repetition %d)", i, r.System, r.Case(), r.Repetition)
	for name, v := range map[string]string{
		"system": r.System, "algorithm": string(r.Algorithm), "scenario": string(r.Scenario),
		"topology": r.Topology, "go_version": r.GoVersion, "revision": r.Revision,
	} {
		if strings.TrimSpace(v) == "" {
			bad("%s: %s is empty", id, name)
		}
	}
	if r.Operations != want.Operations {
		bad("%s: %d operations, want %d", id, r.Operations, want.Operations)
	}
	if r.SuccessfulOperations != r.Operations {
		bad("%s: %d of %d operations succeeded", id, r.SuccessfulOperations, r.Operations)
	}
	if r.Workers != r.Scenario.Workers() || r.Keys != r.Scenario.Keys() {
		bad("%s: %d workers on %d keys, the scenario has %d on %d", id, r.Workers, r.Keys, r.Scenario.Workers(), r.Scenario.Keys())
	}
	if r.OpsPerSecond <= 0 {
		bad("%s: ops_per_second %v", id, r.OpsPerSecond)
	}
	if !(0 < r.P50Ms && r.P50Ms <= r.P95Ms && r.P95Ms <= r.P99Ms) {
		bad("%s: percentiles p50 %v p95 %v p99 %v out of order", id, r.P50Ms, r.P95Ms, r.P99Ms)
	}
	if r.AllocatedBytesPerOp < 0 || r.MallocsPerOp < 0 {
		bad("%s: negative allocation", id)
	}
	if r.GOMAXPROCS < 1 {
		bad("%s: gomaxprocs %d", id, r.GOMAXPROCS)
	}
	for _, s := range want.Placement {
		if r.System == s && !r.PlacementVerified {
			bad("%s: placement not verified", id)
		}
	}
}
