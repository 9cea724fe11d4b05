-- renew: extends the lease of the current claim. Runs after record.lua.
-- KEYS[1] record key   ARGV[1] token   ARGV[2] lease ms (0 hands the claim back)
-- Reply: 1 renewed, 0 the token no longer holds the record.
-- The record is written with its times and without an expiry (a claim that SET NX wrote
-- had both in its key's expiry; a pending record must never expire).
local key = KEYS[1]
local cur = redis.pcall('GET', key)
if type(cur) ~= 'string' or string.sub(cur, 1, 37) ~= 'idt2p' .. ARGV[1] then return 0 end
local r = decode(cur)
if not r then return 0 end
local now = now_ms()
fill_times(key, r, now)
r.lease_ms = tonumber(ARGV[2])
r.lease_until = now + r.lease_ms
redis.call('SET', key, encode(r))
return 1
