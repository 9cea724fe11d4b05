-- settle_if_equal: the one-command settle (on_loop/one_command.rs) on a server without
-- `SET ... IFEQ` (Redis before 8.4): the same compare-and-set, in a script that builds
-- nothing. The full settle script (settle.lua) costs Redis 7.0 about 20 us a call, this
-- one about 6 (INFO commandstats, issue 30): it decides nothing but equality.
-- KEYS[1] record key  ARGV[1] the settled value  ARGV[2] the claim as SET NX wrote it
-- ARGV[3] expires at, epoch ms on the server's clock as the client reckons it ('' for none)
-- Reply: 1 settled, 0 the record is not exactly that claim (settle.lua then decides).
local key = KEYS[1]
if redis.pcall('GET', key) ~= ARGV[2] then return 0 end
if ARGV[3] == '' then
  redis.call('SET', key, ARGV[1])
else
  redis.call('SET', key, ARGV[1], 'PXAT', ARGV[3])
end
return 1
