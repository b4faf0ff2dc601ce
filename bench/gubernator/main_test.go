package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/bench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func noEnv(string) (string, bool) { return "", false }

// The peer's smoke run: quick mode, every scenario it applies to, the
// report held to bench.md as granary-bench reads it. No timing asserted.
func TestQuickRunReportsEveryRepetitionWithKeysOnNodeZero(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"--quick", "--output=-", "--revision=test"}, noEnv, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	require.NoError(t, bench.Check(stdout.Bytes(), bench.Expectation{
		Repetitions: bench.DefaultRepetitions, Operations: bench.QuickOperations, Placement: []string{"gubernator"},
	}))
	assert.Contains(t, stderr.String(), "bench: [6/6] gubernator token/partitioned/cancellable")
}

func TestBadFlagsExitWithTwo(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, run(t.Context(), []string{"--operations=1"}, noEnv, &stdout, &stderr))
	assert.Equal(t, 2, run(t.Context(), []string{"--no-such-flag"}, noEnv, &stdout, &stderr))
	assert.Empty(t, stdout.String())
}
