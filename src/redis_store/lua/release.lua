-- release: an operator frees a stuck pending record. It becomes failed (so the next call
-- runs) and loses its token (so the stuck owner can no longer settle it). Runs after
-- record.lua. A pending record of format 1 is migrated.
-- KEYS[1] record key.  Reply: 1 released, 0 not pending.
local key = KEYS[1]
local r, _, legacy, err = load(key)
if err then return err end
if not r or r.status ~= 'p' then return 0 end
local now = now_ms()
if not legacy then fill_times(key, r, now) end
r.status, r.token, r.updated = 'f', RELEASED_TOKEN, now
r.lease_ms, r.lease_until, r.expires = nil, nil, nil
r.fields.r = nil
r.fields.e = '{"name":"Released","message":"released by an operator"}'
redis.call('SET', key, encode(r))
return 1
