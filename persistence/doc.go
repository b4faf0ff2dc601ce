// Package persistence stores grain state: a Store interface with ETags for
// optimistic concurrency, an in-memory Store that is the embedded default,
// and a Flusher that writes changed state in the background.
//
// # Stores and ETags
//
// A Store keeps bytes under a Key (grain type, grain key, state name). Every
// stored value has an ETag, an opaque version that changes on each write.
// Write and Delete name the ETag the caller last saw; "" means "nothing is
// stored". A mismatch fails with a *ConflictError, which matches ErrConflict
// under errors.Is and carries the expected and stored ETags. As in Orleans, a
// conflict means the caller's copy is stale (typically a second activation
// of the same grain wrote meanwhile), and the right response is to
// deactivate and reload, not to retry. Read reports a missing state with
// ErrNotFound.
//
// MemoryStore is the default Store and the one tests use. Package
// persistence/storetest is the conformance suite that every Store passes;
// run it from the tests of a new Store.
//
// # The flushing model
//
// Grain state is owned by its activation and touched only inside the
// activation's turns, one at a time, without locks. The Flusher respects
// that: it never reads state. The owner opens a Record with two functions:
// schedule, which runs a function inside the owner's next turn, and
// snapshot, which encodes the state to bytes. After changing state in a
// turn the owner calls Record.MarkDirty, a single atomic operation.
//
// Once per FlusherOptions.Period (50 ms by default) the flusher's writer
// goroutine asks the owner of each dirty record, through schedule, for a
// snapshot. Inside that turn the record is marked clean and snapshotted;
// the writer then writes the bytes outside the turn, so a slow store never
// blocks the grain. If the write fails the record is dirty again and the
// next period retries it with a fresh snapshot. If schedule reports that the
// owner is gone, the record is dropped quietly.
//
// This is a best-effort snapshot, not a log: a crash loses at most the
// changes of the last period (plus any write that was failing). Owners that
// need a change to be durable before they answer call Record.Flush, which
// writes synchronously. Record.Close writes what is dirty on deactivation,
// Record.Clear deletes the stored state, and Flusher.Stop writes everything
// still dirty when the silo shuts down.
//
// An owner that goes away without waiting for the store, as every
// activation of a stopping silo does, calls Record.CloseQueued instead of
// Close: the final snapshot is taken in its turn and written by the
// flusher's writers with those of the other records, up to Writers at a
// time, so that a slow store holds up no deactivation. Its callback tells
// the owner when the write has landed: an activation unregisters only
// then, so that no later activation loads the state before it.
// Flusher.Stop waits for those writes within its context; when it runs
// out of time, or some fail, it logs one line with how many states it
// could not write and the first of their keys, and Flusher.Unwritten
// counts them at any time.
//
// # Ordering
//
// At most one write per record is in flight, and they land in the order
// their snapshots were taken. Flush, Clear and Close wait for a background
// write in flight and discard a snapshot still queued for the writer, which
// their own, newer snapshot supersedes.
//
// # Conflicts
//
// A background write that conflicts is not retried; Record.Err reports it,
// a function registered with Record.OnConflict is told of it, and Flush and
// Close return it. The owner decides what to do, normally to deactivate
// (the actor host does). Flusher.Stop returns the failures of its final
// flush.
package persistence
