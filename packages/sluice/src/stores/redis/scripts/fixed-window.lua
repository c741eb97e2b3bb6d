-- Fixed window, twin of src/algorithms/fixed-window.ts, as sections over the locals the
-- scripts set (README.md beside this file).
-- State "start:count:span", live until the window ends: start + window, or start + span when that
-- is sooner (the window was opened under a shorter one; a longer window applies from the next).
-- A value of two fields, "start:count", ends at start + window.
-- Compact (on the Redis clock, shared/call.lua): the count alone, an integer, in a key that expires
-- when the window ends; read as a window of the length in force ending then. Written while the
-- state spans the whole window in force (it always does unless the window was made shorter).
-- `period` is the start of the calendar period the step counts in, `window` that period's length,
-- for a calendar policy (`align: 'calendar'`); -1 for windows that open at a key's first request.
-- A state opened before the period began counts nothing in it.
--- @args limit window period cost
--- @carry start count finish

--- @section read
local start, count, finish
--- @include "shared/get-state"
if raw then
  local c1 = find(raw, ':', 1, true)
  if c1 == nil then
    count, finish = raw + 0, call('PEXPIRETIME', key)
    start = finish - window
  else
    local c2 = find(raw, ':', c1 + 1, true)
    start = sub(raw, 1, c1 - 1) + 0
    finish = start + window
    if c2 then
      count = sub(raw, c1 + 1, c2 - 1) + 0
      local span = sub(raw, c2 + 1) + 0
      if span < window then
        finish = start + span
      end
    else
      count = sub(raw, c1 + 1) + 0
    end
  end
  if finish <= now or start < period then
    start = nil
  end
end
local stored, live = raw ~= false, start ~= nil

--- @section decide
-- A live state is the current window (a clock that stepped backwards stays in it); else a fresh one.
if start == nil then
  if period < 0 then
    start, count, finish = now, 0, now + window
  else
    start, count, finish = period, 0, period + window
  end
end
local allowed = count + cost <= limit
local retry = 0
if not allowed then
  -- Never below 0: a calendar period is drawn by the client's clock, which a server clock may
  -- have passed (see docs/policies.md#calendar-quotas).
  retry = finish - now
  if retry < 0 then
    retry = 0
  end
end

--- @section save
-- Write count until finish. A live window ends after now, a fresh one at now + window; a calendar
-- period drawn by the client's clock may have ended by the Redis clock (kept 1 ms then).
if compact and finish > now and finish - start == window then
  call('SET', key, format('%d', count), 'PXAT', format('%d', finish))
else
  local value = format('%d:%d:%d', start, count, finish - start)
  local ttl = finish - now + slack
  if ttl < 1 then
    ttl = 1
  end
  call('PSETEX', key, format('%d', ttl), value)
end

--- @section commit
count = count + cost
--- @include "save"

--- @section report
local reset = 0
if count > 0 then
  reset = finish - now
  if reset < 0 then
    reset = 0
  end
end
local remaining = limit - count
if remaining < 0 then
  remaining = 0
end

--- @section refund
count = count - cost
if count < 0 then
  count = 0
end
if count == 0 then
  call('DEL', key)
else
  --- @include "save"
end
