// Package bench is the benchmark harness every performance claim of granary
// comes from: the rate-limiting matrix (algorithm x scenario x overload)
// measured against granary and, in the same run, against the peers a Go team
// would pick instead.
//
// # Model
//
// A System is something to measure: granary's rate-limiting grains on a
// topology, or a peer (the bare transport echo, protoactor-go's cluster,
// golang.org/x/time/rate, redis_rate, gubernator). The harness starts it,
// asks it to Prepare each Case it measures, and drives the returned Workload
// with the case's workers: one Do per operation. A Source is a system that
// measures itself in another process (gubernator, whose module is kept apart
// from the framework's) and hands back its rows.
//
// Per case the harness checks placement, warms up (Options.WarmupPerHolder
// operations per holder, and a whole unmeasured repetition with
// Options.WarmWorkload), then runs Options.Repetitions measured repetitions
// of Options.Operations operations, checking placement before and after each.
// Every repetition becomes one Result: throughput, latency percentiles,
// allocation and garbage collection from runtime/metrics, and the heap
// retained after a full collection. Allocation is whole-process: it includes
// the silos, the fixture, background flushing and the harness itself.
//
// Every operation must succeed: a Workload returns an error (ErrNotGranted
// for a rejected acquisition) and the case fails. Options never reject
// during measurement: limits are large (Quota permits in a Window, no
// automatic replenishment).
//
// # Output
//
// Execute writes one JSON document, {"results": [...]} with notes and
// failures beside it, prints a table with each granary figure as a ratio to
// each peer figure of the same run, and reports progress on stderr. Check
// verifies a document: every field of every repetition, every operation
// successful, placement verified where it applies. LoadSides and
// WriteComparison read the reports of a revision comparison
// (bench/compare.sh) and give the medians of every case from all samples.
//
// Config.Bind registers the harness's flags, each mirrored by an
// environment variable (RATE_LIMIT_PERFORMANCE_ALGORITHM,
// RATE_LIMIT_PERFORMANCE_CALLER_TOKEN, RATE_LIMIT_PERFORMANCE_WARM_WORKLOAD,
// RATE_LIMIT_PERFORMANCE_OUTPUT and the others listed in docs/performance.md).
//
// The package imports nothing but the standard library, so that the
// gubernator module can build on it without reaching the framework.
package bench
