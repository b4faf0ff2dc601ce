package storetest_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/persistence/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// flawEnv names the flaw TestFlawedStore runs the suite against, in the
// child process TestSuiteCatchesEveryFlaw starts.
const flawEnv = "GRANARY_STORETEST_FLAW"

func TestSoundStoreConforms(t *testing.T) {
	storetest.Run(t, func(*testing.T) persistence.Store { return newFlawedStore("") })
}

// TestFlawedStore runs the suite against a store with the flaw named by
// flawEnv; it is meant to fail, and runs only as a child process.
func TestFlawedStore(t *testing.T) {
	flaw := os.Getenv(flawEnv)
	if flaw == "" {
		t.Skip("runs as a child of TestSuiteCatchesEveryFlaw")
	}
	storetest.Run(t, func(*testing.T) persistence.Store { return newFlawedStore(flaw) })
}

// TestSuiteCatchesEveryFlaw shows that each subtest can fail, and fails
// for the flaw it is about: a store broken in one way fails exactly the
// subtests that check that rule.
func TestSuiteCatchesEveryFlaw(t *testing.T) {
	want := map[string][]string{
		"ignores-etag":              {"ConcurrentWritersOneWins", "Delete", "DeleteThenRecreate", "StaleETagConflicts"},
		"unlocked-check":            {"ConcurrentWritersOneWins"},
		"reuses-etags-after-delete": {"DeleteThenRecreate"},
		"keeps-writer-slice":        {"DataIsCopied"},
		"shares-read-slice":         {"DataIsCopied"},
		"ignores-context":           {"CancelledContext", "ExpiredDeadline"},
		"joins-key-parts":           {"ManyKeys"},
		"loses-empty-values":        {"EmptyValues"},
		"truncates-large-values":    {"LargeValue"},
		"close-does-nothing":        {"Closed"},
	}
	require.Len(t, want, len(flaws))
	failLine := regexp.MustCompile(`(?m)^\s*--- FAIL: TestFlawedStore/(\w+)`)
	for _, flaw := range flaws {
		t.Run(flaw, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestFlawedStore$", "-test.v", "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), flawEnv+"="+flaw)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the suite passed a store that %s:\n%s", flaw, out)
			var failed []string
			for _, m := range failLine.FindAllStringSubmatch(string(out), -1) {
				failed = append(failed, m[1])
			}
			slices.Sort(failed)
			assert.Equal(t, want[flaw], failed, "%s", out)
		})
	}
}
