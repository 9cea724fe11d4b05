-- renew: extend the lease of the current claim (a pending record has no Redis expiry).
-- KEYS[1] record key   ARGV[1] token   ARGV[2] lease ms
-- Reply: 1 renewed, 0 the token no longer holds the record.
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local function int(n) return string.format('%.0f', n) end
local cur = redis.call('HMGET', key, 'status', 'token')
if cur[1] ~= 'pending' or cur[2] ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease_expires_at = now + tonumber(ARGV[2])
redis.call('HSET', key, 'lease_expires_at', int(lease_expires_at))
-- A pending record of an older version may still carry a Redis expiry: it must not vanish.
redis.call('PERSIST', key)
return 1
