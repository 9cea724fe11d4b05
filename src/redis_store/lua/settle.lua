-- settle (complete or fail): only the holder of the current claim may settle it.
-- KEYS[1] record key
-- ARGV[1] token  ARGV[2] 'c' (completed) or 'f' (failed)  ARGV[3] the outcome's FIELDS
-- (result and error, see record.rs)  ARGV[4] ttl ms ('' for none)  ARGV[5] how long the
-- call took, ms ('' for unknown)
-- Reply: 1 settled (or this very settle was already applied), 0 refused.
-- Lean on purpose (every new call runs it): one GET, TIME, PEXPIRETIME only for a claim
-- that SET NX wrote (it was made at PEXPIRETIME - CLAIM_PX), one SET that also sets the
-- record's expiry (ttlMs from now) or drops it.
local key = KEYS[1]
local token, status, outcome = ARGV[1], ARGV[2], ARGV[3]
local cur = redis.pcall('GET', key)
-- Absent, or not a string (a format-1 hash can only be another process's claim).
if type(cur) ~= 'string' then return 0 end
if string.sub(cur, 1, 37) ~= 'idt2p' .. token then
  -- A resend of this very settle (applied, but its reply lost with the connection) still
  -- succeeds; any other settle of a claim that is no longer current is refused.
  if string.sub(cur, 1, 37) ~= 'idt2' .. status .. token then return 0 end
  local semi = string.find(cur, ';', 38, true)
  local fields, pos, seen = string.sub(cur, semi + 1), 1, ''
  while pos <= #fields do
    local colon = string.find(fields, ':', pos + 1, true)
    local len = tonumber(string.sub(fields, pos + 1, colon - 1))
    local tag = string.sub(fields, pos, pos)
    if tag == 'r' or tag == 'e' then seen = seen .. string.sub(fields, pos, colon + len) end
    pos = colon + len + 1
  end
  if seen == outcome then return 1 end
  return 0
end
local semi = string.find(cur, ';', 38, true)
local attempts, created = string.match(string.sub(cur, 38, semi - 1), '^(%d*),%d*,(%d*),')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if created == '' then
  local at = redis.call('PEXPIRETIME', key)
  if at > 0 then created = string.format('%.0f', at - 1000000000000000)
  else created = string.format('%.0f', now) end
end
local ttl = tonumber(ARGV[4])
local expires = ''
if ttl then expires = string.format('%.0f', now + ttl) end
local value = 'idt2' .. status .. token .. attempts .. ',,' .. created .. ',' .. string.format('%.0f', now) ..
  ',,' .. expires .. ',' .. ARGV[5] .. ';' .. string.sub(cur, semi + 1) .. outcome
if ttl then
  redis.call('SET', key, value, 'PXAT', expires)
else
  redis.call('SET', key, value)
end
return 1
