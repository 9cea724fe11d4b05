-- release: an operator frees a stuck pending record. Its token becomes RELEASED_TOKEN, which
-- no claim has, so the stuck owner can no longer renew or settle it. With ARGV[1] = '1'
-- (reconcile, the default) it stays pending with its lease run out: a claim nobody holds,
-- which the next call takes over as it takes over a dead owner's (claim.lua: attempts + 1,
-- taken over, reconcile asked). With '0' it becomes failed: the next call runs. Runs after
-- record.lua. A pending record of format 1 is migrated.
-- KEYS[1] record key  ARGV[1] '1' reconcile or '0' fail.  Reply: 1 released, 0 not pending.
local key = KEYS[1]
local r, _, legacy, err = load(key)
if err then return err end
if not r or r.status ~= 'p' then return 0 end
local now = now_ms()
if not legacy then fill_times(key, r, now) end
r.token, r.updated = RELEASED_TOKEN, now
if ARGV[1] == '1' then
  -- Written without an expiry, as every pending record (it never expires while unresolved).
  r.lease_until = now
else
  r.status = 'f'
  r.lease_ms, r.lease_until, r.expires = nil, nil, nil
  r.fields.r = nil
  r.fields.e = '{"name":"Released","message":"released by an operator"}'
end
redis.call('SET', key, encode(r))
return 1
