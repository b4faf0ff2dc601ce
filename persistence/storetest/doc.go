// Package storetest is the conformance suite for persistence.Store
// implementations. A store author runs it from a test of their own:
//
//	func TestMyStoreConforms(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) persistence.Store {
//			return mystore.New(...) // a fresh, empty store
//		})
//	}
//
// The suite checks the Store contract that the flusher and the actor host
// rely on: reading a missing state, writing and reading back, an ETag that
// changes on every write and is never reused (not even after a delete and
// re-create), a stale ETag refused with a typed *persistence.ConflictError
// that changes nothing, deletes with and without a matching ETag, empty and
// large values, many keys that stay apart however their parts are spelled,
// data slices that neither side can change afterwards, racing writers of
// one ETag of which exactly one wins, contexts that are already cancelled or
// past their deadline, and, for a store with a Close method, what it answers
// once closed.
//
// Every subtest gets its own store from newStore, so a store that keeps
// state elsewhere (a server) should give each one a fresh namespace, such as
// a unique key prefix.
package storetest
