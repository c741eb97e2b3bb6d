-- GCRA, twin of src/algorithms/gcra.ts, as fragments over the locals that scripts/variants/*.lua set
-- (see README.md beside this file).
-- State: the theoretical arrival time (TAT) as whole ms plus a remainder in 1/limit ms ("ms", or
-- "ms:rem" when the remainder is not 0; one integer is kept inside the key object by Redis), live
-- until ms (+1 with a remainder).
--- @args limit window capacity cost
--- @carry tat_ms tat_rem full charge before after

--- @fragment read
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

--- @fragment base
-- The later of the stored TAT and now; debt = how far it is ahead of now, in 1/limit ms.
if tat_ms == nil or tat_ms < now then
  tat_ms, tat_rem = now, 0
end
local full = capacity * window
local before = (tat_ms - now) * limit + tat_rem

--- @fragment shift
-- Move the TAT by `delta` (1/limit ms) and write it, or delete it when it is not ahead of now.
local total = tat_rem + delta
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

--- @fragment decide
--- @use base
local charge = cost * window
local allowed = before + charge <= full
local retry = 0
if not allowed then
  retry = math.ceil((before + charge - full) / limit)
end
local after = before

--- @fragment commit
after = before + charge
local delta = charge
--- @use shift

--- @fragment report
local remaining = math.max(0, math.floor((full - after) / window))
local reset = math.ceil(after / limit)

--- @fragment refund
--- @use base
local delta = -math.min(before, cost * window)
--- @use shift
