// Package redisstore is a persistence.Store in Redis: the shared, durable
// store that lets a grain's state follow it from silo to silo. Every silo
// of a cluster connects to the same Redis with the same key prefix; when a
// grain deactivates on one silo and activates on another, the new
// activation reads what the old one wrote.
//
// # Layout
//
// Each piece of state is one Redis hash, named
//
//	<prefix>{<grain type>:<grain key>}:<state name>
//
// with two fields: e, the ETag, and d, the bytes. The braces are a Redis
// Cluster hash tag, so all the states of one grain hash to one slot; ':',
// '{', '}' and '%' inside the parts are percent-encoded, so no two keys
// share a hash. The prefix (default "granary:") separates clusters that
// share a server.
//
// # Concurrency
//
// Writes and deletes check the caller's ETag and change the state in one
// atomic step inside Redis, a Lua script; a mismatch is a
// *persistence.ConflictError. ETags are random, so they are never reused,
// not even after a delete. When a reply is lost (the connection broke after
// the command was sent), the store remembers the ETag it proposed, and the
// next attempt for that key accepts it as its own, so that a network blip
// is not mistaken for a second activation.
//
// # Failures
//
// A Redis that cannot be reached gives an error matching ErrUnavailable,
// at once rather than after hidden retries; the flusher keeps the state
// dirty and writes it again every period until Redis is back. Errors match
// the persistence package's ErrNotFound, ErrConflict and ErrClosed where
// the Store contract says so, and ErrRejected or ErrCorrupt otherwise.
//
// # Connecting
//
// New connects itself from Options (ParseURL reads them from a
// redis://host:port/db URL); NewWithClient takes any go-redis client,
// including a *redis.ClusterClient for Redis Cluster. Run Redis with
// persistence on (appendonly yes) if state must survive a Redis restart.
package redisstore
