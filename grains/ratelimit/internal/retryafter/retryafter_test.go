package retryafter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestSecondsRoundsUpToWholeSeconds(t *testing.T) {
	for hint, want := range map[time.Duration]int64{
		0:                       1,
		-time.Second:            1,
		time.Nanosecond:         1,
		time.Second:             1,
		time.Second + 1:         2,
		7500 * time.Millisecond: 8,
		time.Hour:               3600,
		1<<63 - 1:               9223372037, // 292 years, rounded up
	} {
		assert.Equal(t, want, Seconds(hint), "%v", hint)
	}
}

func TestCeilIsCapped(t *testing.T) {
	assert.Equal(t, int64(MaxSeconds), Ceil(1e30))
	assert.Equal(t, int64(3), Ceil(2.5e9))
}
