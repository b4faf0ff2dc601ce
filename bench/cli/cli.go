package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/granary-go/granary/bench"
	"github.com/granary-go/granary/bench/peer"
	"github.com/granary-go/granary/bench/subject"
)

// Environment variables of the command's own flags, beside bench's.
const (
	EnvGubernator  = "RATE_LIMIT_PERFORMANCE_GUBERNATOR"
	EnvRedisServer = "RATE_LIMIT_PERFORMANCE_REDIS_SERVER"
	EnvCPUProfile  = "RATE_LIMIT_PERFORMANCE_CPUPROFILE"
	EnvMemProfile  = "RATE_LIMIT_PERFORMANCE_MEMPROFILE"
)

// Main runs granary-bench with args (without the program's name) and
// returns its exit code: 0 when every case succeeded, 1 when one failed,
// 2 for bad flags or environment.
func Main(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("granary-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(fs) }
	var (
		cfg                    bench.Config
		gubernator             string
		redisServer            = peer.DefaultRedisServer
		cpuProfile, memProfile string
	)
	err := errors.Join(
		cfg.Bind(fs, lookupEnv),
		bench.BindEnv(fs, lookupEnv, bench.StringFlag(&gubernator), "gubernator", EnvGubernator,
			"the gubernator peer's `binary` (default: built from "+peer.GubernatorModule+" when found)"),
		bench.BindEnv(fs, lookupEnv, bench.StringFlag(&redisServer), "redis-server", EnvRedisServer,
			"the redis-server `binary` the redis_rate peer runs"),
		bench.BindEnv(fs, lookupEnv, bench.StringFlag(&cpuProfile), "cpuprofile", EnvCPUProfile,
			"write a CPU profile of the whole run to this `file`"),
		bench.BindEnv(fs, lookupEnv, bench.StringFlag(&memProfile), "memprofile", EnvMemProfile,
			"write an allocation profile of the whole run to this `file`"),
	)
	if err != nil {
		fmt.Fprintln(stderr, "granary-bench:", err)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // the usage was printed, as asked
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "granary-bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	systems := []bench.System{subject.New(subject.NewCluster())}
	var sources []bench.Source
	if cfg.Peers {
		systems = append(systems, peer.NewEcho(), peer.NewProtoActor(), peer.XRate{}, peer.NewRedisRate(redisServer))
		module := ""
		if gubernator == "" {
			if wd, err := os.Getwd(); err == nil {
				module = peer.FindGubernatorModule(wd)
			}
		}
		sources = append(sources, peer.NewGubernator(gubernator, module))
	}
	stopProfiles, err := startProfiles(cpuProfile, memProfile)
	if err != nil {
		fmt.Fprintln(stderr, "granary-bench:", err)
		return 2
	}
	err = errors.Join(bench.Execute(ctx, cfg, systems, sources, stdout, stderr), stopProfiles())
	if err != nil {
		fmt.Fprintln(stderr, "granary-bench:", err)
	}
	return bench.ExitCode(err)
}

// usage prints what the command does and every flag with its values.
func usage(fs *flag.FlagSet) {
	fmt.Fprintf(fs.Output(), `usage: granary-bench [flags]

Measures granary's rate-limiting grains: every case of the matrix (algorithm x
scenario x caller context) on a two-silo cluster in this process, and with
-peers the same workload on the peers, in the same run. It prints a table of
the figures to stdout (or writes the JSON report, -output) and a progress line
per repetition to stderr. docs/performance.md explains each figure.

Systems (-systems): %s, %s.

Exit status: 0 when every case succeeded, 1 when one failed (an operation not
granted, a call that failed, a grain that moved), 2 for bad flags.

Each flag's environment variable sets its default; a flag given wins.

Flags:
`, bench.Granary, strings.Join(peerNames(), ", "))
	fs.PrintDefaults()
}

// peerNames are the names of the peers, as -systems takes them.
func peerNames() []string {
	return []string{peer.NewEcho().Name(), peer.NewProtoActor().Name(), peer.XRate{}.Name(),
		peer.NewRedisRate("").Name(), peer.NewGubernator("", "").Name()}
}

// startProfiles starts the CPU profile when cpu names a file, and returns
// what stops it and writes the allocation profile when mem names one.
func startProfiles(cpu, mem string) (stop func() error, err error) {
	var cpuFile *os.File
	if cpu != "" {
		if cpuFile, err = os.Create(cpu); err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(cpuFile); err != nil {
			return nil, errors.Join(err, cpuFile.Close())
		}
	}
	return func() error {
		var errs []error
		if cpuFile != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpuFile.Close())
		}
		if mem != "" {
			f, err := os.Create(mem)
			if err != nil {
				return errors.Join(append(errs, err)...)
			}
			errs = append(errs, pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		}
		return errors.Join(errs...)
	}, nil
}
