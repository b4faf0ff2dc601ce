package ratelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
)

func lines(buf *bytes.Buffer) []string {
	s := strings.TrimSpace(buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestBurstThenOneLinePerInterval(t *testing.T) {
	var buf bytes.Buffer
	fake := clock.NewFake(time.Unix(0, 0))
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), fake, 3, time.Second)

	written := 0
	for range 100 {
		if l.Log(slog.LevelWarn, "refused", slog.String("peer", "p")) {
			written++
		}
	}
	assert.Equal(t, 3, written, "the burst, then nothing until time passes")
	assert.EqualValues(t, 97, l.Suppressed())
	require.Len(t, lines(&buf), 3)

	fake.Advance(time.Second)
	require.True(t, l.Log(slog.LevelWarn, "refused"))
	got := lines(&buf)
	require.Len(t, got, 4)
	assert.Contains(t, got[3], "suppressed=97", "the next line says how many were dropped")
	assert.False(t, l.Log(slog.LevelWarn, "refused"), "one token per interval")

	fake.Advance(time.Second)
	require.True(t, l.Log(slog.LevelInfo, "refused"))
	got = lines(&buf)
	assert.Contains(t, got[4], "suppressed=1")
	assert.EqualValues(t, 98, l.Suppressed(), "the total keeps counting")
}

func TestDisabledLevelSpendsNothing(t *testing.T) {
	var buf bytes.Buffer
	fake := clock.NewFake(time.Unix(0, 0))
	l := New(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})), fake, 1, time.Second)
	for range 10 {
		assert.False(t, l.Log(slog.LevelInfo, "quiet"))
	}
	assert.Zero(t, l.Suppressed())
	assert.True(t, l.Log(slog.LevelWarn, "loud"), "the token is still there")
	assert.Len(t, lines(&buf), 1)
}

func TestZeroIntervalLetsEverythingThrough(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), nil, 0, 0)
	for range 50 {
		require.True(t, l.Log(slog.LevelInfo, "line"))
	}
	assert.Len(t, lines(&buf), 50)
}
