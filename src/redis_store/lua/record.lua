-- The record helpers that claim.lua, renew.lua, release.lua and clear.lua start with (see
-- record.rs for the format). settle.lua, which every new call runs, keeps its own lean copy
-- of what it needs.
local CLAIM_PX = 1000000000000000
local RELEASED_TOKEN = string.rep('-', 32)
local function int(n) return string.format('%.0f', n) end
local function num(n) if n then return int(n) end return '' end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function put(tag, s) return tag .. #s .. ':' .. s end

-- FIELDS as a table (tag -> bytes), or nil when malformed.
local function parse_fields(s)
  local out, pos = {}, 1
  while pos <= #s do
    local colon = string.find(s, ':', pos + 1, true)
    if not colon then return nil end
    local len = tonumber(string.sub(s, pos + 1, colon - 1))
    if not len or colon + len > #s then return nil end
    out[string.sub(s, pos, pos)] = string.sub(s, colon + 1, colon + len)
    pos = colon + len + 1
  end
  return out
end

-- A format-2 value as a table, or nil when it is not one.
local function decode(v)
  if string.sub(v, 1, 4) ~= 'idt2' then return nil end
  local semi = string.find(v, ';', 38, true)
  if not semi then return nil end
  local n = {}
  for part in string.gmatch(string.sub(v, 38, semi - 1) .. ',', '([^,]*),') do
    n[#n + 1] = tonumber(part) or false
  end
  local f = parse_fields(string.sub(v, semi + 1))
  if #n ~= 7 or not f then return nil end
  return {status = string.sub(v, 5, 5), token = string.sub(v, 6, 37), attempts = n[1] or 1,
    lease_ms = n[2] or nil, created = n[3] or nil, updated = n[4] or nil, lease_until = n[5] or nil,
    expires = n[6] or nil, duration = n[7] or nil, fields = f}
end

-- A SET NX claim leaves its times empty: it was made at PEXPIRETIME - CLAIM_PX.
local function fill_times(key, r, now)
  if r.created then return end
  local at = redis.call('PEXPIRETIME', key)
  if at > 0 then
    at = at - CLAIM_PX
    r.created, r.updated = at, at
    if r.status == 'p' then r.lease_until = at + (r.lease_ms or 0) end
  else
    -- Its expiry was removed by hand (PERSIST): when it was made is unknown, and its lease
    -- counts as run out, so the claim is taken over (reconcile asked), never stuck for good.
    r.created, r.updated = now, now
    if r.status == 'p' then r.lease_until = 0 end
  end
end

local function encode(r)
  local f = r.fields
  local out = {'idt2', r.status, r.token, num(r.attempts), ',', num(r.lease_ms), ',', num(r.created), ',',
    num(r.updated), ',', num(r.lease_until), ',', num(r.expires), ',', num(r.duration), ';'}
  for _, tag in ipairs({'k', 'n', 'f', 'm', 'r', 'e', 't'}) do
    if f[tag] then out[#out + 1] = put(tag, f[tag]) end
  end
  return table.concat(out)
end

-- A record of format 1 (a hash, written by versions before format 2) as a format-2 table;
-- nil when the hash is not a record of idempotent-tools.
local function from_hash(key)
  local h = redis.call('HGETALL', key)
  local f = {}
  for i = 1, #h, 2 do f[h[i]] = h[i + 1] end
  local status = ({pending = 'p', completed = 'c', failed = 'f'})[f.status or '']
  if not status or not f.key then return nil end
  local token = f.token
  if status ~= 'p' then token = f.settled_token end
  if not token or #token ~= 32 then token = RELEASED_TOKEN end
  local meta = f.meta
  if meta == '' then meta = nil end
  local r = {status = status, token = token, attempts = tonumber(f.attempts) or 1,
    created = tonumber(f.created_at), updated = tonumber(f.updated_at),
    duration = tonumber(f.duration_ms),
    fields = {k = f.key, n = f.name or '', f = f.fingerprint or '', m = meta, r = f.result, e = f.error}}
  if status == 'p' then
    r.lease_until = tonumber(f.lease_expires_at) or 0
  else
    -- Older versions left an expires_at on pending records; only a settled one's counts.
    r.expires = tonumber(f.expires_at)
  end
  r.created = r.created or 0
  r.updated = r.updated or r.created
  return r
end

-- The record at `key`: its table (nil when absent), its value as stored (a string) and
-- whether it is a format-1 hash; or an error reply when the key holds something else.
local function load(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'string' then
    local r = decode(v)
    if not r then return nil, nil, false, redis.error_reply('key ' .. key .. ' holds a value that idempotent-tools did not write') end
    return r, v, false
  elseif type(v) == 'table' then
    local r = redis.call('TYPE', key).ok == 'hash' and from_hash(key)
    if not r then return nil, nil, false, redis.error_reply('key ' .. key .. ' holds a value that idempotent-tools did not write') end
    return r, nil, true
  end
  return nil, nil, false
end
