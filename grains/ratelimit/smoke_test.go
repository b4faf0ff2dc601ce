package ratelimit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEachAlgorithmGrantsUpToItsLimitThenRejects(t *testing.T) {
	e := newEnv(t)
	for _, alg := range algorithms {
		for _, k := range entries {
			t.Run(alg.name+"/"+k.String(), func(t *testing.T) {
				h := alg.holder(e.caller(k), fmt.Sprint("smoke-", k), 3, 0, true)
				ctx := context.Background()
				for i := range 3 {
					l, err := h.Acquire(ctx, 1)
					require.NoError(t, err)
					assert.True(t, l.Acquired(), "acquisition %d", i)
				}
				l, err := h.Acquire(ctx, 1)
				require.NoError(t, err)
				assert.False(t, l.Acquired())
				st, err := h.Statistics(ctx)
				require.NoError(t, err)
				assert.EqualValues(t, 0, st.AvailablePermits)
				assert.EqualValues(t, 3, st.TotalSuccessfulLeases)
				assert.EqualValues(t, 1, st.TotalFailedLeases)
			})
		}
	}
}
