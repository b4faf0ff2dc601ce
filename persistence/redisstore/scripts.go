package redisstore

import "github.com/redis/go-redis/v9"

// The ETag checks run as Lua scripts rather than WATCH/MULTI/EXEC. A
// script runs atomically inside Redis in one round trip (EVALSHA), needs no
// connection pinned across calls, never aborts and retries under
// contention, and touches a single key, so it runs unchanged on Redis
// Cluster. WATCH/MULTI would cost at least three round trips on a
// dedicated connection, and an aborted EXEC would need a second read to
// tell a conflict from a race lost to a writer of the same ETag.
//
// A state is a hash with two fields: e, the ETag, and d, the data. ETags
// are random (see newETag), so a store never reuses one, not even after a
// delete and re-create, and a script can tell its own earlier attempt from
// anyone else's write.

// writeScript stores data if the stored ETag is the expected one.
//
// KEYS[1] is the state's hash. ARGV[1] is the new ETag, ARGV[2] the data,
// ARGV[3] the expected ETag ("" for "nothing stored"), and ARGV[4...] the
// ETags of this store's earlier attempts whose replies were lost (see
// doubts), which are accepted too. A stored ETag equal to the new one means
// this very call already ran (a client-side retry): it succeeded.
//
// It returns {1, new ETag} on success and {0, stored ETag} on a conflict.
var writeScript = redis.NewScript(`
local current = redis.call('HGET', KEYS[1], 'e') or ''
if current == ARGV[1] then
	return {1, current}
end
local matches = current == ARGV[3]
for i = 4, #ARGV do
	if current == ARGV[i] then matches = true end
end
if not matches then
	return {0, current}
end
redis.call('HSET', KEYS[1], 'e', ARGV[1], 'd', ARGV[2])
return {1, ARGV[1]}
`)

// deleteScript removes the state if the stored ETag is the expected one.
//
// KEYS[1] is the state's hash. ARGV[1] is the expected ETag ("" for
// "nothing stored", which then succeeds and does nothing), and ARGV[2...]
// the ETags of earlier attempts whose replies were lost ("" for a delete).
//
// It returns {1, ""} on success and {0, stored ETag} on a conflict.
var deleteScript = redis.NewScript(`
local current = redis.call('HGET', KEYS[1], 'e') or ''
local matches = current == ARGV[1]
for i = 2, #ARGV do
	if current == ARGV[i] then matches = true end
end
if not matches then
	return {0, current}
end
redis.call('DEL', KEYS[1])
return {1, ''}
`)
