//go:build !unix

package silo_test

import "time"

// processCPU is not measured here; the benchmarks then leave out CPU per
// call.
func processCPU() time.Duration { return 0 }
