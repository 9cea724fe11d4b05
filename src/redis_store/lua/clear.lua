-- clear: deletes one key only when it is a record this store wrote under that key: a
-- value whose key field, appended to the store's prefix, is KEYS[1] (format 2), or a hash
-- whose `key` field is (format 1). Another application's keys under the prefix, and the
-- records of a store whose prefix extends ours (`p:` and `p:sub:`), stay. Runs after
-- record.lua.
-- KEYS[1] the Redis key   ARGV[1] the record's key (KEYS[1] without the prefix)
-- Reply: 1 deleted, 0 not ours (or absent).
local v = redis.pcall('GET', KEYS[1])
local own
if type(v) == 'string' then
  local r = decode(v)
  own = r and r.fields.k
elseif type(v) == 'table' then
  -- Another type: a format-1 record is a hash (HMGET on anything else is an error: not ours).
  local h = redis.pcall('HMGET', KEYS[1], 'key')
  own = not h.err and h[1]
end
if own ~= ARGV[1] then return 0 end
return redis.call('UNLINK', KEYS[1])
