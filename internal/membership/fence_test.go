package membership

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/cluster"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A silo whose fence the core lifted serves only once the view it acts on
// has a strict majority of the stable membership active again: its
// reachability probes come back before gossip re-admits the others.
func TestAHealedSiloWaitsForAViewWithTheMajority(t *testing.T) {
	view := func(members map[string]cluster.Status) cluster.View {
		var v cluster.View
		for id, st := range members {
			v.Members = append(v.Members, cluster.Member{ID: id, Status: st})
		}
		slices.SortFunc(v.Members, func(a, b cluster.Member) int { return strings.Compare(a.ID, b.ID) }) // as views are
		return v
	}
	stable := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name    string
		members map[string]cluster.Status
		want    bool
	}{
		{"its own side only", map[string]cluster.Status{"c": cluster.StatusActive}, false},
		{"one more, still joining", map[string]cluster.Status{"c": cluster.StatusActive, "a": cluster.StatusJoining}, false},
		{"one more, active", map[string]cluster.Status{"c": cluster.StatusActive, "a": cluster.StatusActive}, true},
		{"all", map[string]cluster.Status{"a": cluster.StatusActive, "b": cluster.StatusActive, "c": cluster.StatusActive}, true},
		{"silos outside the stable membership do not count", map[string]cluster.Status{"c": cluster.StatusActive, "x": cluster.StatusActive, "y": cluster.StatusActive}, false},
	} {
		assert.Equal(t, tc.want, majorityActive(stable, view(tc.members)), tc.name)
	}
	assert.False(t, majorityActive([]string{"a", "b", "c", "d"}, view(map[string]cluster.Status{"a": cluster.StatusActive, "b": cluster.StatusActive})),
		"half of an even membership is no majority")
}
