-- Built by scripts/build-lua.mjs from packages/sluice/src/stores/redis/scripts/hybrid/lease.lua: do not edit.
-- Sluice hybrid mode (src/scale/hybrid.ts): one atomic call on a key's shared state that gives back
-- what an ended lease did not spend, decides one request exactly, and grants this instance a lease.
-- KEYS: the state of one (policy, subject): `prefix:{subject}:policy:l`, a hash.
-- ARGV: kind ('w' fixed window, 's' sliding window counter, 'b' token bucket or GCRA), now (ms),
--   limit, window (ms), capacity, cost (0: no request), peek (1: decide without charging), want
--   (units of lease wanted, 0: none), lease (ms), returned units, their tag (-1: a refund), the
--   key's count of denials when their lease was granted, divisor (a grant is at most what is left
--   / divisor), least grant.
-- Reply: {allowed (0/1), grant, remaining, retry after ms, reset ms, tag, under-admitted units,
--   the key's count of denials, when the lease must end (ms)}. Under-admitted: returned units of a lease during which this state
--   denied a request (a denial that might have been admitted, had the units not been leased out).
-- Every state keeps `n`, its count of denials. A fixed window keeps {s: its start, c: its count}
-- and opens at the first request after the last one ended, as the exact algorithm's; a sliding
-- window counter keeps {s: window index, c: this window's count, p: the previous one's} on windows
-- aligned to the clock, as the exact one's. A lease is charged to `c` and ends with its window, so
-- its tag is the window (start or index). Buckets keep the debt {a: time, d: debt in ms x limit (units x window), e: epoch}: a unit
-- costs `window`, the bucket holds `capacity x window`. A lease is charged as if spent at the end of
-- its length (the debt is at least lease x limit after it), so however it is spent within that
-- length the admissions fit the bucket. Its return is exact only while no refill was cut at the
-- cap since it (then the debt is the sum of what was charged since): `e` names the last such cut
-- (its ms, or one more than the last when two fall in one ms), and a return under another epoch has nothing left to give back.
local kind = ARGV[1]
local now = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local w = tonumber(ARGV[4])
local capacity = tonumber(ARGV[5])
local cost = tonumber(ARGV[6])
local peek = ARGV[7] == '1'
local want = tonumber(ARGV[8])
local leaseMs = tonumber(ARGV[9])
local returned = tonumber(ARGV[10])
local returnTag = tonumber(ARGV[11])
local deniedBefore = tonumber(ARGV[12])
local allowed = 1
local grant = 0
local under = 0
local divisor = tonumber(ARGV[13])
local least = tonumber(ARGV[14])
local state = redis.call('HMGET', KEYS[1], 's', 'c', 'p', 'n', 'a', 'd', 'e')
local n = tonumber(state[4]) or 0
if returned > 0 and returnTag ~= -1 and n > deniedBefore then under = returned end
local remaining, retry, reset, tag, ttl, ends
if kind == 'b' then
  local at = tonumber(state[5])
  local d = tonumber(state[6]) or 0
  local e = tonumber(state[7]) or 0
  if at == nil then
    at = now
    e = now
  elseif now > at then
    local refill = (now - at) * limit
    if refill > d then
      d = 0
      e = math.max(e + 1, now)
    else
      d = d - refill
    end
    at = now
  end
  if returned > 0 then
    if returnTag == -1 or returnTag == e then d = math.max(0, d - returned * w) end
  end
  local full = capacity * w
  if cost > 0 then
    if d + cost * w <= full then
      if not peek then d = d + cost * w end
    else
      allowed = 0
      n = n + 1
      retry = math.ceil((d + cost * w - full) / limit)
    end
  end
  if want > 0 and allowed == 1 and not peek then
    local base = math.max(d, leaseMs * limit)
    grant = math.min(want, math.floor(math.floor((full - base) / w) / divisor))
    if grant < least then grant = 0 end
    if grant > 0 then
      if base > d then e = math.max(e + 1, at) end
      d = base + grant * w
    end
  end
  remaining = math.max(0, math.floor((full - d) / w))
  reset = math.ceil(d / limit)
  tag = e
  ends = now + leaseMs
  ttl = reset + 2 * leaseMs + 1000
  redis.call('HSET', KEYS[1], 'a', at, 'd', d, 'e', e, 'n', n)
elseif kind == 'w' then
  local start = tonumber(state[1])
  local c = tonumber(state[2]) or 0
  if start == nil or now >= start + w then
    start = now
    c = 0
  end
  -- A clock behind the window's start stays at that start, the most conservative point.
  local left = start + w - math.max(now, start)
  if returned > 0 and (returnTag == -1 or returnTag == start) then c = math.max(0, c - returned) end
  if cost > 0 then
    if c + cost <= limit then
      if not peek then c = c + cost end
    else
      allowed = 0
      n = n + 1
      retry = left
    end
  end
  if want > 0 and allowed == 1 and not peek then
    grant = math.min(want, math.floor((limit - c) / divisor))
    if grant < least then grant = 0 end
    c = c + grant
  end
  remaining = math.max(0, limit - c)
  reset = left
  tag = start
  ends = math.min(now + leaseMs, start + w)
  ttl = left + 1000
  redis.call('HSET', KEYS[1], 's', start, 'c', c, 'n', n)
else
  local index = math.floor(now / w)
  local s = tonumber(state[1])
  local c = tonumber(state[2]) or 0
  local p = tonumber(state[3]) or 0
  if s == nil then
    s = index
  elseif s < index then
    if s == index - 1 then p = c else p = 0 end
    c = 0
    s = index
  end
  -- A clock behind the stored window stays at that window's start, the most conservative point.
  local elapsed = math.max(0, now - s * w)
  if returned > 0 then
    if returnTag == -1 or returnTag == s then
      c = math.max(0, c - returned)
    elseif returnTag == s - 1 then
      p = math.max(0, p - returned)
    end
  end
  local used = p * (w - elapsed) + c * w
  if cost > 0 then
    if used + cost * w <= limit * w then
      if not peek then
        c = c + cost
        used = used + cost * w
      end
    else
      allowed = 0
      n = n + 1
      local room = limit - c - cost
      if room >= 0 and p > 0 then
        retry = w - elapsed - math.floor(room * w / p)
      else
        retry = w - elapsed + w - math.floor((limit - cost) * w / math.max(1, c))
      end
    end
  end
  if want > 0 and allowed == 1 and not peek then
    grant = math.min(want, math.floor(math.floor((limit * w - used) / w) / divisor))
    if grant < least then grant = 0 end
    if grant > 0 then
      c = c + grant
      used = used + grant * w
    end
  end
  remaining = math.max(0, math.floor((limit * w - used) / w))
  if c > 0 then
    reset = 2 * w - elapsed
  elseif p > 0 then
    reset = w - elapsed
  else
    reset = 0
  end
  tag = s
  ends = math.min(now + leaseMs, (s + 1) * w)
  ttl = 2 * w - elapsed + 1000
  redis.call('HSET', KEYS[1], 's', s, 'c', c, 'p', p, 'n', n)
end
redis.call('PEXPIRE', KEYS[1], ttl)
return {allowed, grant, remaining, retry or 0, reset, tag, under, n, ends}
