package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/bench"
)

func sample(ops float64) bench.Report {
	return bench.Report{Results: []bench.Result{{
		System: bench.Granary, Algorithm: bench.TokenBucket, Scenario: bench.HotKey, Repetition: 1,
		Operations: 10, SuccessfulOperations: 10, OpsPerSecond: ops, P99Ms: 0.5, AllocatedBytesPerOp: 700,
		Topology: "t", Revision: "r",
	}}}
}

func TestSummaryOfAnABBARun(t *testing.T) {
	dir := t.TempDir()
	for name, ops := range map[string]float64{"1-base.json": 100, "2-head.json": 150, "3-head.json": 170, "4-base.json": 120} {
		data, err := json.Marshal(sample(ops))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{dir}, &stdout, &stderr), stderr.String())
	assert.Regexp(t, `granary\s+token\s+hot-key\s+background\s+2/2\s+110\s+160\s+\+45\.5%`, stdout.String())
}

func TestSummaryRefusesWhatItCannotRead(t *testing.T) {
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 2, run(nil, &stdout, &stderr))
	assert.Equal(t, 1, run([]string{filepath.Join(t.TempDir(), "missing")}, &stdout, &stderr))
	assert.Empty(t, stdout.String())
}
