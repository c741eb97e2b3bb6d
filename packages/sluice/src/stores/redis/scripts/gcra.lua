-- GCRA, twin of src/algorithms/gcra.ts, as sections over the locals the scripts set
-- (README.md beside this file).
-- State: the theoretical arrival time (TAT) as whole ms plus a remainder in 1/limit ms, and its lead:
-- how many whole ms it was ahead of the step that wrote it (0: not known). Live until ms (+1 with a
-- remainder). One integer (kept inside the key object by Redis) while it fits: minus the lead followed
-- by ms in 13 digits, when the remainder is 0, 0 <= ms < 10^13 and 0 < lead < 922336; just ms when
-- the lead is 0 too; else "ms:rem:lead" (or "ms:rem"). The sign makes a script that reads the value
-- as a bare TAT see a time long past (no state), never one far ahead.
-- Compact (on the Redis clock, shared/call.lua), when the remainder is 0: the lead alone, in at most
-- 12 digits, in a key that expires at the TAT. Any other value without a colon has 13 or more digits
-- (a client clock's TAT before 2001 is written as "ms:0:lead").
-- Read under other parameters (the twin's arrival()): a remainder is cut below the new limit, and
-- the TAT is at most a full refill of the new burst after the step that wrote it (ms - lead).
--- @args limit window capacity cost
--- @carry tat_ms tat_rem full cost_debt before after

--- @section read
local tat_ms, tat_rem, lead
--- @include "shared/get-state"
if raw then
  local c1 = find(raw, ':', 1, true)
  if c1 then
    local c2 = find(raw, ':', c1 + 1, true)
    tat_ms = sub(raw, 1, c1 - 1) + 0
    if c2 then
      tat_rem, lead = sub(raw, c1 + 1, c2 - 1) + 0, sub(raw, c2 + 1) + 0
    else
      tat_rem, lead = sub(raw, c1 + 1) + 0, 0
    end
  elseif #raw <= 12 and byte(raw, 1) ~= 45 then
    tat_ms, tat_rem, lead = call('PEXPIRETIME', key), 0, raw + 0
  elseif #raw > 14 and byte(raw, 1) == 45 then
    tat_ms, tat_rem, lead = sub(raw, -13) + 0, 0, sub(raw, 2, -14) + 0
  else
    tat_ms, tat_rem, lead = raw + 0, 0, 0
  end
  if tat_rem >= limit then
    tat_rem = limit - 1
  end
  if lead > 0 and lead * limit + tat_rem > capacity * window then
    local whole = floor(capacity * window / limit)
    tat_ms, tat_rem = tat_ms - lead + whole, capacity * window - whole * limit
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

--- @section base
-- The later of the stored TAT and now; debt = how far it is ahead of now, in 1/limit ms.
if tat_ms == nil or tat_ms < now then
  tat_ms, tat_rem = now, 0
end
local full = capacity * window
local before = (tat_ms - now) * limit + tat_rem

--- @section shift
-- Move the TAT by `delta` (1/limit ms) and write it, or delete it when it is not ahead of now. Its
-- lead: how far it is ahead of now, at most the part within one full refill.
local total = tat_rem + delta
local whole = floor(total / limit)
local ms, rem = tat_ms + whole, total - whole * limit
local lead_ms = ms - now
if lead_ms * limit + rem > full then
  lead_ms = floor((full - rem) / limit)
end
if lead_ms < 0 then
  lead_ms = 0
end
local value, live_until
if rem ~= 0 then
  value, live_until = format('%d:%d:%d', ms, rem, lead_ms), ms + 1
elseif compact and lead_ms < 1000000000000 then
  value, live_until = nil, ms
elseif ms < 1000000000000 or ms >= 10000000000000 or lead_ms >= 922336 then
  value, live_until = format('%d:0:%d', ms, lead_ms), ms
elseif lead_ms > 0 then
  value, live_until = format('-%d%013d', lead_ms, ms), ms
else
  value, live_until = format('%d', ms), ms
end
if live_until <= now then
  call('DEL', key)
elseif value == nil then
  call('SET', key, format('%d', lead_ms), 'PXAT', format('%d', ms))
else
  call('PSETEX', key, format('%d', live_until - now + slack), value)
end

--- @section decide
--- @include "base"
local cost_debt = cost * window
local allowed = before + cost_debt <= full
local retry = 0
if not allowed then
  retry = ceil((before + cost_debt - full) / limit)
end
local after = before

--- @section commit
after = before + cost_debt
local delta = cost_debt
--- @include "shift"

--- @section report
local remaining = floor((full - after) / window)
if remaining < 0 then
  remaining = 0
end
local reset = ceil(after / limit)

--- @section refund
--- @include "base"
-- Give back the cost, never more than the debt there is.
local taken = cost * window
if before < taken then
  taken = before
end
local delta = -taken
--- @include "shift"
