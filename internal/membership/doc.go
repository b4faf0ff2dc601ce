// Package membership wires a silo to its cluster's membership (package
// cluster): it joins through the seeds and announces the silo active,
// follows the membership view into the grain directory and the links to
// the other silos, publishes the silo's load, keeps the minority fence
// (fence.go), and, when the silo stops, announces that it leaves, hands
// its part of the directory over and leaves.
//
// The silo keeps the life cycle: it calls Join from Start, AnnounceLeaving
// and Leave from Stop, at the points its stop order needs, and runs the
// goroutines here on its own background group, which refuses new work
// once the silo stops.
package membership
