-- expire: gives a settled record the expiry ARGV[1] (epoch ms, on the server's clock, which
-- the record's own times are on): a step's record expires with its completed call (see
-- lib/core/step.ts). A pending record is left alone (it never expires while unresolved),
-- and so is a record of format 1 (written by an older version; steps of this one are not).
-- Runs after record.lua.
-- KEYS[1] record key  ARGV[1] expires at.  Reply: 1 set, 0 left alone.
local key = KEYS[1]
local r, _, legacy, err = load(key)
if err then return err end
if not r or legacy or r.status == 'p' then return 0 end
local at = tonumber(ARGV[1])
r.expires = at
redis.call('SET', key, encode(r), 'PXAT', int(at))
return 1
