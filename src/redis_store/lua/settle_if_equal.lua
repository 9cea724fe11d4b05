-- settle_if_equal: the one-command settle (on_loop/one_command.rs) on a server without
-- `SET ... IFEQ` (Redis before 8.4): the same compare-and-set, in a script that builds
-- nothing, for every such settle of one turn of the event loop at once (one EVALSHA a
-- turn, not one a call: issue 39). The full settle script (settle.lua) costs Redis 7.0
-- about 20 us a call, this one about 6 for one key (INFO commandstats, issue 30): it
-- decides nothing but equality, key by key, each as if alone.
-- KEYS[i] a record key; for each, three ARGV: ARGV[3i-2] the settled value, ARGV[3i-1]
-- the claim as SET NX wrote it, ARGV[3i] expires at, epoch ms on the server's clock as the
-- client reckons it ('' for none).
-- Reply: one integer per key, 1 settled, 0 the record is not exactly that claim
-- (settle.lua then decides).
local out = {}
for i, key in ipairs(KEYS) do
  local a = 3 * i
  if redis.pcall('GET', key) ~= ARGV[a - 1] then
    out[i] = 0
  else
    if ARGV[a] == '' then
      redis.call('SET', key, ARGV[a - 2])
    else
      redis.call('SET', key, ARGV[a - 2], 'PXAT', ARGV[a])
    end
    out[i] = 1
  end
end
return out
