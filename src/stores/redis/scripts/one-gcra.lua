-- Sluice apply for one GCRA step, flat: the same decision as apply.lua with gcra.lua
-- (src/algorithms/gcra.ts), inlined for the common single-policy call. Keep them in step: the
-- conformance vectors and the differential test run both.

local STRIDE, CAPACITY = 4, true
--- @include "one-prelude"

-- The TAT as whole ms plus a remainder in 1/limit ms ("ms" or "ms:rem"); live until ms (+1 with rem).
local tat_ms, tat_rem
local raw = redis.call('GET', key)
if raw then
  local colon = string.find(raw, ':', 1, true)
  if colon then
    tat_ms, tat_rem = string.sub(raw, 1, colon - 1) + 0, string.sub(raw, colon + 1) + 0
  else
    tat_ms, tat_rem = raw + 0, 0
  end
  local live_until = tat_ms
  if tat_rem > 0 then
    live_until = tat_ms + 1
  end
  if live_until <= now then
    tat_ms = nil
  end
end
local stored, live = raw ~= false, tat_ms ~= nil
--- @include "one-drop"

-- The later of the stored TAT and now; debt = how far it is ahead of now, in 1/limit ms.
if tat_ms == nil or tat_ms < now then
  tat_ms, tat_rem = now, 0
end
local full = capacity * window
local charge = cost * window
local before = (tat_ms - now) * limit + tat_rem
local allowed = before + charge <= full
local retry = 0
if not allowed then
  retry = math.ceil((before + charge - full) / limit)
end

local after = before
if allowed and not peek and not held then
  after = before + charge
  local total = tat_rem + charge
  local whole = math.floor(total / limit)
  local ms, rem = tat_ms + whole, total - whole * limit
  local value, live_until
  if rem ~= 0 then
    value, live_until = string.format('%d:%d', ms, rem), ms + 1
  else
    value, live_until = string.format('%d', ms), ms
  end
  if live_until <= now then
    redis.call('DEL', key)
  else
    redis.call('PSETEX', key, string.format('%d', live_until - now + slack), value)
  end
end
local remaining = math.max(0, math.floor((full - after) / window))
local reset = math.ceil(after / limit)
--- @include "one-reply"
