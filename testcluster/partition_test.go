package testcluster_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/testcluster"
)

// sees reports whether silo i's view shows exactly the silos named.
func sees(c *testcluster.Cluster, i int, want ...int) bool {
	v, err := c.Silo(i).Members()
	if err != nil {
		return false
	}
	var got, names []string
	for _, m := range v.Members {
		got = append(got, m.ID)
	}
	for _, w := range want {
		names = append(names, testcluster.Name(w))
	}
	slices.Sort(names)
	return slices.Equal(got, names)
}

func TestPartitionCutsASiloOffAndHealMakesOneClusterAgain(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Silos: 3})
	c.Partition([]int{0, 1}, []int{2})
	require.Eventually(t, func() bool { return sees(c, 0, 0, 1) && sees(c, 1, 0, 1) && sees(c, 2, 2) },
		10*time.Second, 10*time.Millisecond, "each side declares the other failed")
	c.Heal()
	require.Eventually(t, func() bool { return sees(c, 0, 0, 1, 2) && sees(c, 1, 0, 1, 2) && sees(c, 2, 0, 1, 2) },
		10*time.Second, 10*time.Millisecond, "one view of three after the heal")
	c.WaitForMembership() // and the directory's ranges settled
}

func TestIsolateCutsOneSiloOff(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Silos: 3})
	c.Isolate(1)
	require.Eventually(t, func() bool { return sees(c, 0, 0, 2) && sees(c, 1, 1) && sees(c, 2, 0, 2) },
		10*time.Second, 10*time.Millisecond, "silo 1 is alone")
	c.Heal()
	c.WaitForMembership()
}
