-- settle_staged: the settle of settle.lua for a large outcome, which the client has written
-- ahead of this script under a staging key (a plain SET: STAGED_HEAD spaces, then the
-- outcome's FIELDS). Handing a large string to Lua is dear (Redis copies every argument
-- into a Lua string and Lua collects it again: measured +9 to +15 us of server time for a
-- 4 KB result); here the script only touches the small pending record, writes the settled
-- record's head over the staged spaces, appends the pending record's fields, and renames
-- the staging key into place.
-- KEYS[1] record key  KEYS[2] staging key (in the record's hash slot)
-- ARGV[1] token  ARGV[2] 'c' or 'f'  ARGV[3] ttl ms ('' for none)
-- ARGV[4] how long the call took, ms ('' for unknown)  ARGV[5] STAGED_HEAD (its length)
-- Reply: 1 settled (or this very settle was already applied), 0 refused.
local key, stage = KEYS[1], KEYS[2]
local token, status = ARGV[1], ARGV[2]
local width = tonumber(ARGV[5])
local cur = redis.pcall('GET', key)
if type(cur) ~= 'string' or string.sub(cur, 1, 37) ~= 'idt2p' .. token then
  redis.call('UNLINK', stage)
  -- A resend of this very settle (applied, its reply lost): the record carries its status
  -- and token (a claim settles once; a resend carries the same outcome).
  if type(cur) == 'string' and string.sub(cur, 1, 37) == 'idt2' .. status .. token then return 1 end
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
local ttl = tonumber(ARGV[3])
local expires = ''
if ttl then expires = string.format('%.0f', now + ttl) end
local head = 'idt2' .. status .. token .. attempts .. ',,' .. created .. ',' .. string.format('%.0f', now) ..
  ',,' .. expires .. ',' .. ARGV[4]
-- The numbers end in spaces up to the fixed head (decoders trim them), then ';'. A staged
-- outcome is never empty, so a value no longer than the head means the staging key was
-- gone (it expired before this ran) and SETRANGE made a new one.
if redis.call('SETRANGE', stage, 0, head .. string.rep(' ', width - 1 - #head) .. ';') <= width then
  redis.call('UNLINK', stage)
  return redis.error_reply('the staged outcome of this settle is gone (it expired before the settle ran); send the settle again')
end
redis.call('APPEND', stage, string.sub(cur, semi + 1))
redis.call('RENAME', stage, key)
if ttl then
  redis.call('PEXPIREAT', key, expires)
else
  redis.call('PERSIST', key)
end
return 1
