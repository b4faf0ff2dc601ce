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
// are random (128 bits from crypto/rand), so a store never reuses one, not
// even after a delete and re-create, and a script can tell its own earlier
// attempt from anyone else's write.

// Both scripts take the same arguments. KEYS[1] is the state's hash;
// ARGV[1] is the expected ETag ("" for "nothing stored"), ARGV[2] the ETag
// the call proposes ("" for a delete), ARGV[3] the data (empty for a
// delete), ARGV[4] the state's time to live in milliseconds ("0": none;
// a delete ignores it), and ARGV[5...] the ETags of this store's earlier
// attempts on the key whose replies were lost (see doubts), which match
// too. They return {1, ETag} on success and {0, stored ETag} on a
// conflict.

// checkPrelude reads the stored ETag into current and sets matches if it
// is the expected one or one of the store's own lost attempts.
const checkPrelude = `
local current = redis.call('HGET', KEYS[1], 'e') or ''
local matches = current == ARGV[1]
for i = 5, #ARGV do
	if current == ARGV[i] then matches = true end
end
`

// writeScript stores the data under the proposed ETag if the stored ETag
// matches. A stored ETag equal to the proposed one means this very call
// already ran (a client-side retry): it succeeded.
var writeScript = redis.NewScript(checkPrelude + `
if current == ARGV[2] then
	return {1, current}
end
if not matches then
	return {0, current}
end
redis.call('HSET', KEYS[1], 'e', ARGV[2], 'd', ARGV[3])
if ARGV[4] ~= '0' then
	redis.call('PEXPIRE', KEYS[1], ARGV[4])
else
	redis.call('PERSIST', KEYS[1])
end
return {1, ARGV[2]}
`)

// deleteScript removes the state if the stored ETag matches; with nothing
// stored and "" expected, it succeeds and does nothing.
var deleteScript = redis.NewScript(checkPrelude + `
if not matches then
	return {0, current}
end
redis.call('DEL', KEYS[1])
return {1, ''}
`)
