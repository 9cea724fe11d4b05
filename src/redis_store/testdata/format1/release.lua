-- release: an operator frees a stuck pending record. It becomes failed (so the next call
-- runs) and loses its token (so the stuck owner can no longer settle it).
-- KEYS[1] record key.  Reply: 1 released, 0 not pending.
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local function int(n) return string.format('%.0f', n) end
local cur = redis.call('HMGET', key, 'status')
if cur[1] ~= 'pending' then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HDEL', key, 'token', 'lease_expires_at', 'settled_token')
redis.call('HDEL', key, 'expires_at')
redis.call('HSET', key, 'status', 'failed', 'updated_at', int(now),
  'error', '{"name":"Released","message":"released by an operator"}')
redis.call('PERSIST', key)
return 1
