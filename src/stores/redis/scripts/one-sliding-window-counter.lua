-- Sluice apply for sliding-window-counter steps, flat: the same decision as apply.lua with
-- sliding-window-counter.lua (its twin; src/algorithms/sliding-window-counter.ts), inlined for the
-- common single-policy call. Keep them in step: the conformance vectors and the differential test run
-- both.

local STRIDE, CAPACITY = 3, false
--- @include "one-prelude"

-- State "start:previous:current" (sliding-window-counter.lua): live until start + 2 x window while
-- current > 0, else until start + window while previous > 0.
local start, previous, current
local raw = redis.call('GET', key)
if raw then
  local c1 = string.find(raw, ':', 1, true)
  local c2 = string.find(raw, ':', c1 + 1, true)
  start = string.sub(raw, 1, c1 - 1) + 0
  previous, current = string.sub(raw, c1 + 1, c2 - 1) + 0, string.sub(raw, c2 + 1) + 0
  local live_until = start
  if current > 0 then
    live_until = start + 2 * window
  elseif previous > 0 then
    live_until = start + window
  end
  if live_until <= now then
    start = nil
  end
end
local stored, live = raw ~= false, start ~= nil
--- @include "one-drop"

-- The view at now (swc_view): the window holding now, with the previous window's count.
local aligned = math.floor(now / window) * window
local elapsed = now - aligned
if start == nil or aligned >= start + 2 * window then
  start, previous, current = aligned, 0, 0
elseif aligned < start then
  -- The clock stepped backwards: stay at the start of the stored window, the most conservative point.
  elapsed = 0
elseif aligned > start then
  start, previous, current = aligned, current, 0
end

-- used x window = previous x (window - elapsed) + current x window
local carried = previous * (window - elapsed)
local allowed = carried + current * window + cost * window <= limit * window
local retry = 0
if not allowed then
  retry = start + elapsed - now
  local room = limit - current - cost
  if room >= 0 then
    retry = retry + window - elapsed - math.floor((room * window) / previous)
  else
    retry = retry + window - elapsed + (window - math.floor(((limit - cost) * window) / current))
  end
end

if allowed and not peek and not held then
  current = current + cost
  local live_until = start
  if current > 0 then
    live_until = start + 2 * window
  elseif previous > 0 then
    live_until = start + window
  end
  if live_until <= now then
    redis.call('DEL', key)
  else
    local value = string.format('%d:%d:%d', start, previous, current)
    redis.call('PSETEX', key, string.format('%d', live_until - now + slack), value)
  end
end
local reset = 0
if current > 0 then
  reset = start - now + 2 * window
elseif previous > 0 then
  reset = start - now + window
end
local remaining = math.max(0, math.floor((limit * window - (carried + current * window)) / window))
--- @include "one-reply"
