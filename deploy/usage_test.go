package deploy

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parseUsage reads back every kind of flag that flag.PrintDefaults
// prints, so the flags it finds in the binary's -h are the binary's.
func TestParseUsageReadsWhatFlagPrintDefaultsPrints(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.String("gateway", "127.0.0.1:30000", "where clients connect ($GRANARY_GATEWAY)")
	fs.String("quoted", `say "hi" (twice)`, "a default with quotes ($GRANARY_QUOTED)")
	fs.String("empty", "", "none (default the host's name) ($GRANARY_EMPTY)")
	fs.Duration("wait", time.Second, "how long (default: (a) second) ($GRANARY_WAIT)")
	fs.Bool("b", false, "one letter, boolean ($GRANARY_B)")
	fs.Bool("on", true, "a boolean that is on, with no variable")
	fs.Duration("stop-timeout", 30*time.Second, "how long, said\nover two lines ($GRANARY_STOP_TIMEOUT)")
	fs.Int("zero", 0, "an int at zero")
	fs.Int("n", 0, "a `count` named in the usage (see $GRANARY_X), then its own ($GRANARY_N)")
	var out strings.Builder
	fs.SetOutput(&out)
	fmt.Fprint(&out, "usage: t [flags]\n\nRuns things (-gateway,\n  -quoted).\n\nFlags:\n")
	fs.PrintDefaults()

	got, err := parseUsage(out.String())
	require.NoError(t, err, out.String())
	want := []binaryFlag{
		{name: "gateway", typ: "string", env: "GRANARY_GATEWAY", def: "127.0.0.1:30000"},
		{name: "quoted", typ: "string", env: "GRANARY_QUOTED", def: `say "hi" (twice)`},
		{name: "empty", typ: "string", env: "GRANARY_EMPTY"},
		{name: "b", env: "GRANARY_B", def: "false"},
		{name: "on", def: "true"},
		{name: "wait", typ: "duration", env: "GRANARY_WAIT", def: "1s"},
		{name: "stop-timeout", typ: "duration", env: "GRANARY_STOP_TIMEOUT", def: "30s"},
		{name: "zero", typ: "int", def: "0"},
		{name: "n", typ: "count", env: "GRANARY_N"},
	}
	require.Len(t, got.byName, len(want), out.String())
	for _, w := range want {
		assert.Equal(t, w, got.byName[w.name], out.String())
		if w.env != "" {
			assert.Equal(t, w, got.byEnv[w.env])
		}
	}
	assert.Len(t, got.byEnv, len(want)-2)
}

// A usage parseUsage cannot read is an error, not a flag quietly lost.
func TestParseUsageRefusesWhatItCannotRead(t *testing.T) {
	for name, usage := range map[string]string{
		"no flag":      "usage: t\n",
		"stray line":   "  -a string\n    \tthe a ($GRANARY_A)\n  stray\n",
		"prose only":   "usage: t\n  -a string, -b string\n\n  -c\n",
		"one variable": "  -a string\n    \tthe a ($GRANARY_A)\n  -b string\n    \tthe b ($GRANARY_A)\n",
	} {
		_, err := parseUsage(usage)
		assert.Error(t, err, name)
	}
}
