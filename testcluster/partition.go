package testcluster

// Partition splits the silos, named by index, into groups whose gossip
// cannot reach each other, as a network partition would: each side soon
// declares the other failed. Silos no group names still reach everyone. It
// replaces an earlier Partition; Heal undoes it. Only gossip is cut: links
// already open between silos and the store stay up.
func (c *Cluster) Partition(groups ...[]int) {
	addrs := make([][]string, len(groups))
	for g, silos := range groups {
		addrs[g] = c.gossipAddresses(silos)
	}
	c.cut.Partition(addrs...)
}

// Isolate cuts the gossip of each silo named by index off from every other
// silo; Heal undoes it.
func (c *Cluster) Isolate(silos ...int) { c.cut.Isolate(c.gossipAddresses(silos)...) }

// Heal undoes every Partition and Isolate: the silos' gossip flows again,
// and their rejoin loops make them one view again within about
// cluster.Timings.RejoinInterval and a few gossip rounds.
func (c *Cluster) Heal() { c.cut.Heal() }

func (c *Cluster) gossipAddresses(silos []int) []string {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(silos))
	for _, i := range silos {
		a, ok := c.mu.gossip[i]
		if !ok || a == "" {
			c.t.Fatalf("testcluster: silo %d was never started", i)
		}
		out = append(out, a)
	}
	return out
}
