-- Sliding window counter, twin of src/algorithms/sliding-window-counter.ts, as sections over the
-- locals the scripts set (README.md beside this file).
-- State "start:previous:current:counted" (start is a multiple of the window `counted` on): live until
-- start + 2 x window while current > 0, else until start + window while previous > 0. Counts of
-- another window length mean nothing on this grid: they read as no state. A value of three fields
-- was counted on the window in force, if its start is a multiple of it.
-- A calendar policy (`align: 'calendar'`) sends `period`, the start of the calendar period holding
-- now, with `window` its length and `following` the next period's; its state's `counted` is the
-- length of the period it was written in. Otherwise `period` is -1 and `following` the window.
-- Compact (on the Redis clock, shared/call.lua), for windows that open at a multiple of the window:
-- previous x 10^8 + current as one integer (current < 10^8, previous < 9 x 10^7) in a key that
-- expires when the state stops mattering (E); read as counted on the window in force, start = E - 2 x
-- window while current > 0, else E - window.
--- @args limit window period following cost
--- @carry start previous current elapsed carried

--- @section read
local start, previous, current
--- @include "shared/get-state"
if raw then
  local c1 = find(raw, ':', 1, true)
  local same_grid, counted
  if c1 == nil then
    local packed = raw + 0
    previous = floor(packed / 100000000)
    current = packed - previous * 100000000
    start = call('PEXPIRETIME', key) - window
    if current > 0 then
      start = start - window
    end
    same_grid, counted = start % window == 0, window
  else
    local c2 = find(raw, ':', c1 + 1, true)
    local c3 = find(raw, ':', c2 + 1, true)
    start = sub(raw, 1, c1 - 1) + 0
    previous = sub(raw, c1 + 1, c2 - 1) + 0
    if c3 then
      current = sub(raw, c2 + 1, c3 - 1) + 0
      counted = sub(raw, c3 + 1) + 0
      same_grid = counted == window
    else
      current = sub(raw, c2 + 1) + 0
      same_grid = start % window == 0
    end
  end
  local live_until = start
  if current > 0 then
    live_until = start + 2 * window
  elseif previous > 0 then
    live_until = start + window
  end
  if period >= 0 then
    -- Counts of this period (or of a later one, the clock having gone back), or the current count
    -- of the period just before; anything older counts nothing.
    if start >= period then
      if current == 0 and previous == 0 then
        start = nil
      end
    elseif not (counted and start + counted == period and current > 0) then
      start = nil
    end
  elseif not same_grid or live_until <= now then
    start = nil
  end
end
local stored, live = raw ~= false, start ~= nil

--- @section view
-- The view at now: the window holding now, with the previous window's count.
local elapsed
if period >= 0 then
  -- The calendar period. Now lies outside it only on a server clock the client's has not reached
  -- or has passed: the step counts in the client's period, at its start or end.
  elapsed = now - period
  if elapsed < 0 then
    elapsed = 0
  elseif elapsed > window then
    elapsed = window
  end
  if start == nil then
    start, previous, current = period, 0, 0
  elseif start < period then
    start, previous, current = period, current, 0
  else
    start = period
  end
else
  local aligned = floor(now / window) * window
  elapsed = now - aligned
  if start == nil or aligned >= start + 2 * window then
    start, previous, current = aligned, 0, 0
  elseif aligned < start then
    -- The clock stepped backwards: stay at the start of the stored window, the most conservative point.
    elapsed = 0
  elseif aligned > start then
    start, previous, current = aligned, current, 0
  end
end

--- @section save
-- Write start:previous:current:window, live as read says.
local live_until = start
if current > 0 then
  live_until = start + window + following
elseif previous > 0 then
  live_until = start + window
end
if live_until <= now then
  call('DEL', key)
elseif compact and period < 0 and current < 100000000 and previous < 90000000 then
  local value = format('%d', previous * 100000000 + current)
  call('SET', key, value, 'PXAT', format('%d', live_until))
else
  local value = format('%d:%d:%d:%d', start, previous, current, window)
  call('PSETEX', key, format('%d', live_until - now + slack), value)
end

--- @section decide
--- @include "view"
-- used x window = previous x (window - elapsed) + current x window
local carried = previous * (window - elapsed)
local allowed = carried + current * window + cost * window <= limit * window
local retry = 0
if not allowed then
  retry = start + elapsed - now
  local room = limit - current - cost
  if room >= 0 then
    retry = retry + window - elapsed - floor((room * window) / previous)
  else
    retry = retry + window - elapsed + (following - floor(((limit - cost) * following) / current))
  end
  if retry < 0 then
    retry = 0
  end
end

--- @section commit
current = current + cost
--- @include "save"

--- @section report
local reset = 0
if current > 0 then
  reset = start - now + window + following
elseif previous > 0 then
  reset = start - now + window
end
if reset < 0 then
  reset = 0
end
local remaining = floor((limit * window - (carried + current * window)) / window)
if remaining < 0 then
  remaining = 0
end

--- @section refund
--- @include "view"
-- What the current window cannot give back comes out of the previous one.
local spill = cost - current
if spill > 0 then
  previous = previous - spill
end
if previous < 0 then
  previous = 0
end
current = current - cost
if current < 0 then
  current = 0
end
if current == 0 and previous == 0 then
  call('DEL', key)
else
  --- @include "save"
end
