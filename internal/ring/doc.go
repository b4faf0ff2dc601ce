// Package ring is the consistent-hash ring of live silos that the grain
// directory is partitioned over.
//
// Each silo sits at DefaultVirtualNodes positions on a 64-bit ring (its
// virtual nodes), derived from its id alone. The directory entry of a grain
// lives on the owner of Hash(grain): the silo at the first position at or
// after that hash, wrapping around. Every silo that builds a Ring from the
// same set of silos gets the same owners, because the hashes are fixed
// algorithms (see Hash) and ties are broken by silo id.
//
// A Ring is an immutable value: build a new one with New when the membership
// view changes, and call Diff(old, new) to learn which hash ranges changed
// owner, from which silo incarnation to which. That is what the directory
// needs to hand a range over before a graceful leave, and to rebuild the
// ranges of a silo that failed.
//
// The package is deterministic and starts no goroutines.
package ring
