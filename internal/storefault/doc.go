// Package storefault wraps a grain-state store and fails chosen calls on
// demand, so that tests of any package can exercise retry and error paths
// against a real store. It is test machinery, not public API.
//
// The wrapper is generic in the key type so that this package does not
// import package persistence: the tests inside package persistence use it,
// and they cannot import a package that imports persistence. For a
// persistence.Store, write
//
//	faulty := storefault.New[persistence.Key](persistence.NewMemoryStore())
//	faulty.FailNext(storefault.OpWrite, 2, errors.New("disk on fire"))
package storefault
