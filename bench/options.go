package bench

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalidOption is wrapped by every problem Options.Validate and
// Config.Bind report.
var ErrInvalidOption = errors.New("bench: invalid option")

// Default counts, as in the reference harness, and the small ones of quick
// mode (smoke runs: every path taken, no figure worth quoting).
const (
	DefaultOperations      = 32768
	DefaultRepetitions     = 3
	DefaultWarmupPerHolder = 4096

	QuickOperations      = 256
	QuickWarmupPerHolder = 32
)

// Options are what a run measures and how much.
type Options struct {
	// Algorithms selects the algorithms of the matrix. Default: all of them.
	Algorithms []Algorithm
	// Scenarios selects the scenarios. Default: all four.
	Scenarios []Scenario
	// Overloads selects the caller contexts (Case.Cancellable values).
	// Default: both, non-cancellable first.
	Overloads []bool
	// Operations is the number of measured operations per repetition.
	// Default: DefaultOperations (QuickOperations in quick mode).
	Operations int
	// Repetitions is the number of measured repetitions per case. Default:
	// DefaultRepetitions.
	Repetitions int
	// WarmupPerHolder is the number of unmeasured operations per holder
	// (key) before the first repetition. Default: DefaultWarmupPerHolder
	// (QuickWarmupPerHolder in quick mode).
	WarmupPerHolder int
	// WarmWorkload adds one unmeasured repetition of the full workload
	// after the warm-up.
	WarmWorkload bool
	// Quick selects the small default counts, for smoke runs.
	Quick bool
	// Revision is the revision measured, for the report. Default: the
	// binary's build information, else `git rev-parse HEAD` (Execute fills
	// it in).
	Revision string
}

// EnsureDefaults fills the fields left zero with their defaults.
func (o *Options) EnsureDefaults() {
	if len(o.Algorithms) == 0 {
		o.Algorithms = slices.Clone(Algorithms)
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = slices.Clone(Scenarios)
	}
	if len(o.Overloads) == 0 {
		o.Overloads = []bool{false, true}
	}
	if o.Operations == 0 {
		o.Operations = DefaultOperations
		if o.Quick {
			o.Operations = QuickOperations
		}
	}
	if o.Repetitions == 0 {
		o.Repetitions = DefaultRepetitions
	}
	if o.WarmupPerHolder == 0 {
		o.WarmupPerHolder = DefaultWarmupPerHolder
		if o.Quick {
			o.WarmupPerHolder = QuickWarmupPerHolder
		}
	}
}

// Validate reports every invalid field.
func (o *Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
	}
	if len(o.Algorithms) == 0 {
		bad("Algorithms is empty")
	}
	for _, a := range o.Algorithms {
		if !slices.Contains(Algorithms, a) {
			bad("Algorithms: %q is none of %v", a, Algorithms)
		}
	}
	if len(o.Scenarios) == 0 {
		bad("Scenarios is empty")
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(Scenarios, s) {
			bad("Scenarios: %q is none of %v", s, Scenarios)
		}
	}
	if n := len(o.Overloads); n == 0 || n > 2 || (n == 2 && o.Overloads[0] == o.Overloads[1]) {
		bad("Overloads must hold false, true or both once, not %v", o.Overloads)
	}
	if o.Operations < Parallelism {
		bad("Operations %d is fewer than the %d workers", o.Operations, Parallelism)
	}
	if o.Repetitions < 1 {
		bad("Repetitions %d is below 1", o.Repetitions)
	}
	if o.WarmupPerHolder < 1 {
		bad("WarmupPerHolder %d is below 1", o.WarmupPerHolder)
	}
	// One holder of the hot key sees the warm-up, the warm repetition and
	// every measured repetition: all must fit in the quota, or the last
	// acquisitions would be rejected.
	if total := o.WarmupPerHolder + o.Operations*(o.Repetitions+1); total > Quota {
		bad("a holder would see %d acquisitions, more than the quota of %d", total, Quota)
	}
	return errors.Join(errs...)
}

// Matrix returns the selection the options measure.
func (o Options) Matrix() Matrix {
	return Matrix{Algorithms: o.Algorithms, Scenarios: o.Scenarios, Overloads: o.Overloads}
}

// Args returns the flags that make Config.Bind reproduce o, with its
// defaults ensured: what the harness hands to a Source's process.
func (o Options) Args() []string {
	o.EnsureDefaults()
	return []string{
		"--algorithm=" + joinNames(o.Algorithms),
		"--scenario=" + joinNames(o.Scenarios),
		"--caller-token=" + callerTokenValue{&o.Overloads}.String(),
		"--operations=" + strconv.Itoa(o.Operations),
		"--repetitions=" + strconv.Itoa(o.Repetitions),
		"--warmup=" + strconv.Itoa(o.WarmupPerHolder),
		"--warm-workload=" + strconv.FormatBool(o.WarmWorkload),
		"--revision=" + o.Revision,
	}
}

func joinNames[T ~string](names []T) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ",")
}

// Config is a run of the harness as its command line describes it.
type Config struct {
	// Options are what is measured and how much.
	Options Options
	// Peers adds the peers to the systems measured.
	Peers bool
	// Systems, when not empty, keeps only the systems so named.
	Systems []string
	// Output is the file the JSON report is written to: "" writes none,
	// "-" writes it to stdout instead of the table.
	Output string
}

// The environment variables that mirror the flags.
const (
	EnvAlgorithm    = "RATE_LIMIT_PERFORMANCE_ALGORITHM"
	EnvScenario     = "RATE_LIMIT_PERFORMANCE_SCENARIO"
	EnvCallerToken  = "RATE_LIMIT_PERFORMANCE_CALLER_TOKEN"
	EnvWarmWorkload = "RATE_LIMIT_PERFORMANCE_WARM_WORKLOAD"
	EnvOutput       = "RATE_LIMIT_PERFORMANCE_OUTPUT"
	EnvQuick        = "RATE_LIMIT_PERFORMANCE_QUICK"
	EnvPeers        = "RATE_LIMIT_PERFORMANCE_PEERS"
	EnvSystems      = "RATE_LIMIT_PERFORMANCE_SYSTEMS"
	EnvOperations   = "RATE_LIMIT_PERFORMANCE_OPERATIONS"
	EnvRepetitions  = "RATE_LIMIT_PERFORMANCE_REPETITIONS"
	EnvWarmup       = "RATE_LIMIT_PERFORMANCE_WARMUP"
	EnvRevision     = "RATE_LIMIT_PERFORMANCE_REVISION"
)

// Bind registers the harness's flags on fs, each taking its default from
// its environment variable when lookupEnv finds one (os.LookupEnv), so
// that a flag given on the command line wins over the environment. It
// returns every environment value it could not parse.
func (c *Config) Bind(fs *flag.FlagSet, lookupEnv func(string) (string, bool)) error {
	b := binder{fs: fs, lookupEnv: lookupEnv}
	o := &c.Options
	b.bind(listValue[Algorithm]{&o.Algorithms, Algorithms}, "algorithm", EnvAlgorithm,
		"the algorithms to measure, a comma-separated `list` of "+joinNames(Algorithms)+", or all")
	b.bind(listValue[Scenario]{&o.Scenarios, Scenarios}, "scenario", EnvScenario,
		"the scenarios to measure, a comma-separated `list` of "+joinNames(Scenarios)+", or all")
	b.bind(callerTokenValue{&o.Overloads}, "caller-token", EnvCallerToken,
		"the caller's context, `false|true|both`: false is context.Background(), true a cancellable context, both measures each")
	b.bind(boolValue{&o.WarmWorkload}, "warm-workload", EnvWarmWorkload,
		"run one unmeasured repetition of the full workload before measuring (true or false)")
	b.bind(stringValue{&c.Output}, "output", EnvOutput, "the `file` to write the JSON report to; - writes it to stdout instead of the table")
	b.bind(boolValue{&o.Quick}, "quick", EnvQuick, fmt.Sprintf("small counts, for smoke runs: %d operations per repetition, %d warm-up operations per holder (true or false)",
		QuickOperations, QuickWarmupPerHolder))
	b.bind(boolValue{&c.Peers}, "peers", EnvPeers, "measure the peers too, in the same run (true or false)")
	b.bind(stringsValue{&c.Systems}, "systems", EnvSystems, "keep only these systems, a comma-separated `list` of "+Granary+" and the peers' names (all: every system run)")
	b.bind(intValue{&o.Operations}, "operations", EnvOperations, fmt.Sprintf("`n` measured operations per repetition, at least %d; 0: %d (%d with -quick)",
		Parallelism, DefaultOperations, QuickOperations))
	b.bind(intValue{&o.Repetitions}, "repetitions", EnvRepetitions, fmt.Sprintf("`n` measured repetitions per case, at least 1; 0: %d", DefaultRepetitions))
	b.bind(intValue{&o.WarmupPerHolder}, "warmup", EnvWarmup, fmt.Sprintf("`n` warm-up operations per holder, at least 1; 0: %d (%d with -quick)",
		DefaultWarmupPerHolder, QuickWarmupPerHolder))
	b.bind(stringValue{&o.Revision}, "revision", EnvRevision, "the `revision` to report (default: the build information, else git rev-parse HEAD)")
	return errors.Join(b.errs...)
}

// BindEnv registers v on fs as flag name, mirrored by environment variable
// env as Bind does: for flags of their own that binaries add beside the
// harness's.
func BindEnv(fs *flag.FlagSet, lookupEnv func(string) (string, bool), v flag.Value, name, env, usage string) error {
	b := binder{fs: fs, lookupEnv: lookupEnv}
	b.bind(v, name, env, usage)
	return errors.Join(b.errs...)
}

// StringFlag returns a flag.Value that sets *s, for BindEnv.
func StringFlag(s *string) flag.Value { return stringValue{s} }

type binder struct {
	fs        *flag.FlagSet
	lookupEnv func(string) (string, bool)
	errs      []error
}

func (b *binder) bind(v flag.Value, name, env, usage string) {
	if s, ok := b.lookupEnv(env); ok && s != "" {
		if err := v.Set(s); err != nil {
			b.errs = append(b.errs, fmt.Errorf("%w: %s=%q: %w", ErrInvalidOption, env, s, err))
		}
	}
	b.fs.Var(v, name, usage+" (env "+env+")")
}

type listValue[T ~string] struct {
	list  *[]T
	known []T
}

func (v listValue[T]) String() string {
	if v.list == nil || len(*v.list) == 0 {
		return "all"
	}
	return joinNames(*v.list)
}

func (v listValue[T]) Set(s string) error {
	list, err := parseList(s, v.known)
	if err != nil {
		return err
	}
	*v.list = list
	return nil
}

type callerTokenValue struct{ overloads *[]bool }

func (v callerTokenValue) String() string {
	if v.overloads == nil || len(*v.overloads) != 1 {
		return "both"
	}
	return strconv.FormatBool((*v.overloads)[0])
}

func (v callerTokenValue) Set(s string) error {
	switch strings.TrimSpace(s) {
	case "both", "":
		*v.overloads = []bool{false, true}
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true, false or both: %w", err)
	}
	*v.overloads = []bool{b}
	return nil
}

type boolValue struct{ b *bool }

func (v boolValue) IsBoolFlag() bool { return true }
func (v boolValue) String() string   { return strconv.FormatBool(v.b != nil && *v.b) }
func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*v.b = b
	return nil
}

type intValue struct{ n *int }

func (v intValue) String() string {
	if v.n == nil {
		return "0"
	}
	return strconv.Itoa(*v.n)
}

func (v intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return err
	}
	*v.n = n
	return nil
}

type stringValue struct{ s *string }

func (v stringValue) String() string {
	if v.s == nil {
		return ""
	}
	return *v.s
}

func (v stringValue) Set(s string) error { *v.s = s; return nil }

type stringsValue struct{ list *[]string }

func (v stringsValue) String() string {
	if v.list == nil {
		return ""
	}
	return strings.Join(*v.list, ",")
}

func (v stringsValue) Set(s string) error {
	*v.list = nil
	for name := range strings.SplitSeq(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*v.list = append(*v.list, name)
		}
	}
	return nil
}
