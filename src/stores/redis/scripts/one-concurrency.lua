-- Sluice apply for concurrency steps, flat: the same decision as apply.lua with concurrency.lua (its
-- twin; src/algorithms/concurrency.ts), inlined for the common single-policy call. Keep them in step:
-- the conformance vectors and the differential test run both.

local STRIDE, CAPACITY = 4, false
--- @include "one-prelude"

-- MessagePack array { expiresAt1, cost1, id1, expiresAt2, ... } of leases (concurrency.lua), live
-- until the last lease expires.
local lease = ARGV[a + 3]
local leases
local raw = redis.call('GET', key)
if raw then
  leases = cmsgpack.unpack(raw)
  local last = now
  for i = 1, #leases, 3 do
    if leases[i] > last then
      last = leases[i]
    end
  end
  if last <= now then
    leases = nil
  end
end
local stored, live = raw ~= false, leases ~= nil
--- @include "one-drop"

-- The live leases: units held, the last expiry (at least now), whether any stored lease has expired
-- and whether the live ones are in expiry order (they are unless the timeout or the clock changed).
local used, last = 0, now
local expired, ordered = false, true
if leases ~= nil then
  local previous = now
  for i = 1, #leases, 3 do
    local expires = leases[i]
    if expires > now then
      used = used + leases[i + 1]
      if expires > last then
        last = expires
      end
      if expires < previous then
        ordered = false
      end
      previous = expires
    else
      expired = true
    end
  end
end
local allowed = used + cost <= limit
local retry = 0
if not allowed then
  -- At the latest, enough leases time out: earliest expiries first.
  local free = limit - used
  if leases ~= nil and ordered then
    for i = 1, #leases, 3 do
      local expires = leases[i]
      if expires > now then
        free = free + leases[i + 1]
        if free >= cost then
          retry = expires - now
          break
        end
      end
    end
  elseif leases ~= nil then
    -- Units freed at each expiry, and the expiries in order (no comparator function: plain numbers).
    local freed, times = {}, {}
    for i = 1, #leases, 3 do
      local expires = leases[i]
      if expires > now then
        if freed[expires] == nil then
          freed[expires] = 0
          times[#times + 1] = expires
        end
        freed[expires] = freed[expires] + leases[i + 1]
      end
    end
    table.sort(times)
    for _, expires in ipairs(times) do
      free = free + freed[expires]
      if free >= cost then
        retry = expires - now
        break
      end
    end
  end
end

if allowed and not peek and not held then
  -- The live leases in stored order, then the new one.
  local nxt = leases
  if nxt == nil then
    nxt = {}
  elseif expired then
    nxt = {}
    for i = 1, #leases, 3 do
      if leases[i] > now then
        nxt[#nxt + 1] = leases[i]
        nxt[#nxt + 1] = leases[i + 1]
        nxt[#nxt + 1] = leases[i + 2]
      end
    end
  end
  local expires = now + window
  nxt[#nxt + 1] = expires
  nxt[#nxt + 1] = cost
  nxt[#nxt + 1] = lease
  used = used + cost
  if expires > last then
    last = expires
  end
  if last <= now then
    redis.call('DEL', key)
  else
    redis.call('PSETEX', key, string.format('%d', last - now + slack), cmsgpack.pack(nxt))
  end
end
local remaining = math.max(0, limit - used)
local reset = last - now
--- @include "one-reply"
