-- clear: deletes one key only when it is a record this store wrote under that key: a hash
-- whose `key` field, appended to the store's prefix, is KEYS[1]. Another application's
-- keys under the prefix, and the records of a store whose prefix extends ours (`p:` and
-- `p:sub:`), stay.
-- KEYS[1] the Redis key   ARGV[1] the record's key (KEYS[1] without the prefix)
-- Reply: 1 deleted, 0 not ours (or absent).
-- pcall: a key of another type answers HMGET with an error, which means "not ours".
local own = redis.pcall('HMGET', KEYS[1], 'key')
if own.err or own[1] ~= ARGV[1] then return 0 end
return redis.call('UNLINK', KEYS[1])
