// Package idmap maps call ids to values for tables that see ids counting
// up, as a connection's calls do: a ring of slots indexed by id, with an
// overflow map for an id whose slot an older entry still holds. Adding,
// finding and removing an entry index an array instead of hashing into a
// map that grows and shrinks with every call.
package idmap
