// Package fence is the minority fence of a silo: the deterministic core
// that decides whether a silo is cut off from the majority of its cluster
// and must stop serving, so that a network partition cannot leave two
// activations of one grain serving on both sides of the cut.
//
// The core keeps the last stable membership: the set of silo ids that this
// silo has seen reachable, unchanged, for a stability period while it
// reached a majority of the stable membership before (at first, the silos
// it reaches when it has just joined). A silo that reaches
// no majority of it is fenced. Because the stable membership only changes
// while a majority is in reach, a silo on the minority side of a cut
// cannot talk itself into a smaller cluster: it stays fenced until the cut
// heals. The majority side drops the silos it lost after the stability
// period, so that a crash costs the survivors nothing once it is
// confirmed; a silo that leaves gracefully is dropped at once.
//
// The fence acts only in a stable membership of at least Options.MinSilos
// silos (3 by default): one silo of two cannot tell its peer's crash from a
// cut, so a pair fences only when asked to. The fence is a heuristic
// against partitions, not a consensus: silos whose stable memberships
// differ (one saw a shrink the other did not) can, after several cuts in
// quick succession, both believe they reach a majority. The store's ETags
// remain the last guard of grain state.
//
// Like internal/host's activation core and raft's RawNode, a Fence owns no
// goroutine, lock or clock: package silo feeds it observations from the
// membership and applies its Status.
package fence
