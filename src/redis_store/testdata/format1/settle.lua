-- settle (complete or fail): only the holder of the current claim may settle it.
-- KEYS[1] record key
-- ARGV[1] token  ARGV[2] 'completed' or 'failed'
-- ARGV[3] '1' when a result is given  ARGV[4] result JSON
-- ARGV[5] '1' when an error is given   ARGV[6] error JSON
-- ARGV[7] ttl ms ('' for none)  ARGV[8] how long the call took, ms ('' for unknown)
-- Reply: 1 settled (or this very settle was already applied), 0 refused.
-- Lean on purpose: one HMGET, TIME once, one HDEL, one HSET with every field, one expiry.
-- A pending record holds no result, error or settled_token (acquire wrote it afresh).
local key = KEYS[1]
local token, status = ARGV[1], ARGV[2]
local ttl_ms = tonumber(ARGV[7])
local function int(n) return string.format('%.0f', n) end
local cur = redis.call('HMGET', key, 'status', 'token', 'settled_token', 'result', 'error')
if cur[1] ~= 'pending' or cur[2] ~= token then
  -- A resend of this very settle (applied, but its reply lost with the connection) still
  -- succeeds; any other settle of a claim that is no longer current is refused.
  local same_result = (ARGV[3] == '1' and cur[4] == ARGV[4]) or (ARGV[3] ~= '1' and not cur[4])
  local same_error = (ARGV[5] == '1' and cur[5] == ARGV[6]) or (ARGV[5] ~= '1' and not cur[5])
  if cur[1] == status and cur[3] == token and same_result and same_error then return 1 end
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fields = {'status', status, 'updated_at', int(now), 'settled_token', token}
if ARGV[3] == '1' then fields[#fields + 1] = 'result'; fields[#fields + 1] = ARGV[4] end
if ARGV[5] == '1' then fields[#fields + 1] = 'error'; fields[#fields + 1] = ARGV[6] end
if ARGV[8] and ARGV[8] ~= '' then fields[#fields + 1] = 'duration_ms'; fields[#fields + 1] = ARGV[8] end
if ttl_ms then
  local expires_at = now + ttl_ms
  fields[#fields + 1] = 'expires_at'
  fields[#fields + 1] = int(expires_at)
  redis.call('HDEL', key, 'token', 'lease_expires_at')
  redis.call('HSET', key, unpack(fields))
  redis.call('PEXPIREAT', key, int(expires_at))
else
  redis.call('HDEL', key, 'token', 'lease_expires_at', 'expires_at')
  redis.call('HSET', key, unpack(fields))
  redis.call('PERSIST', key)
end
return 1
