package rlsload_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/internal/envoyrls"
	"github.com/granary-go/granary/internal/envoyrls/rlsload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunCallsEverySystemAsMuchFromEveryCaller: after one untimed call
// per caller each, the systems take whole turns alike, every caller
// making its slice, and the result counts only the timed calls.
func TestRunCallsEverySystemAsMuchFromEveryCaller(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]map[int]int{"a": {}, "b": {}}
	count := func(name string) rlsload.System {
		return rlsload.System{Name: name, Call: func(_ context.Context, i int) error {
			mu.Lock()
			defer mu.Unlock()
			calls[name][i]++
			return nil
		}}
	}
	turn := rlsload.Callers * rlsload.Slice
	results, err := rlsload.Run(context.Background(), 3*turn, count("a"), count("b"))
	require.NoError(t, err)
	require.Len(t, results, 2)
	for _, r := range results {
		require.Equal(t, 2*turn, r.Calls, "two rounds of turns reach 3 turns in all")
		require.Positive(t, r.OpsPerSecond())
		require.LessOrEqual(t, r.Quantile(0.5), r.Quantile(0.99))
		for i := range rlsload.Callers {
			require.Equal(t, 1+2*rlsload.Slice, calls[r.Name][i], "caller %d of %s", i, r.Name)
		}
	}
}

// TestRunStopsAtAFailedCall: a system whose call fails ends the run with
// its error.
func TestRunStopsAtAFailedCall(t *testing.T) {
	boom := errors.New("boom")
	_, err := rlsload.Run(context.Background(), 1, rlsload.System{Name: "bad", Call: func(context.Context, int) error { return boom }})
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "bad")
}

// TestTheLoadIsAValidConfiguration: granary reads the load's limits, and
// each request is three descriptors of different keys per caller.
func TestTheLoadIsAValidConfiguration(t *testing.T) {
	_, err := envoyrls.Parse("load.yaml", []byte(rlsload.Config))
	require.NoError(t, err)
	req := rlsload.Request(3)
	require.Len(t, req.GetDescriptors(), 3)
	require.NotEqual(t, rlsload.Request(4).GetDescriptors()[1].GetEntries()[0].GetValue(), req.GetDescriptors()[1].GetEntries()[0].GetValue())
}
