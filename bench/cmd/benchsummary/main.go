// Command benchsummary summarises a revision comparison of the benchmark
// harness (bench/compare.sh): it reads every report named on its command
// line or found in a directory named there, puts each on the side its
// name says (NN-base.json, NN-head.json), and prints per case the medians
// of ops/s, p99 and bytes per operation over all samples of each side,
// with the sample counts and the change in ops/s. No sample is dropped
// and no threshold applies; a report with a failure is refused.
//
//	go run ./bench/cmd/benchsummary DIR
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/granary-go/granary/bench"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: benchsummary DIR|FILE...")
		return 2
	}
	sides, err := bench.LoadSides(args)
	if err != nil {
		fmt.Fprintln(stderr, "benchsummary:", err)
		return 1
	}
	if err := bench.WriteComparison(stdout, sides[bench.SideBase], sides[bench.SideHead]); err != nil {
		fmt.Fprintln(stderr, "benchsummary:", err)
		return 1
	}
	return 0
}
