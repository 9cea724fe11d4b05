-- renew: extend the lease of the current claim, and the record's own expiry with it.
-- KEYS[1] record key   ARGV[1] token   ARGV[2] lease ms
-- Reply: 1 renewed, 0 the token no longer holds the record.
if redis.replicate_commands then redis.replicate_commands() end
local key = KEYS[1]
local function int(n) return string.format('%.0f', n) end
local cur = redis.call('HMGET', key, 'status', 'token', 'expires_at')
if cur[1] ~= 'pending' or cur[2] ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease_expires_at = now + tonumber(ARGV[2])
redis.call('HSET', key, 'lease_expires_at', int(lease_expires_at))
local expire_at = lease_expires_at + 3600000
if cur[3] and tonumber(cur[3]) > expire_at then expire_at = tonumber(cur[3]) end
redis.call('PEXPIREAT', key, int(expire_at))
return 1
