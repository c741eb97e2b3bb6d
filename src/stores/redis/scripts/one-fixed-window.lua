-- Sluice apply for fixed-window steps, flat: the same decision as apply.lua with fixed-window.lua
-- (its twin; src/algorithms/fixed-window.ts), inlined for the common single-policy call. Keep them in
-- step: the conformance vectors and the differential test run both.

local STRIDE, CAPACITY = 3, false
--- @include "one-prelude"

-- State "start:count", live until start + window (fixed-window.lua).
local start, count
local raw = redis.call('GET', key)
if raw then
  local colon = string.find(raw, ':', 1, true)
  start, count = string.sub(raw, 1, colon - 1) + 0, string.sub(raw, colon + 1) + 0
  if start + window <= now then
    start = nil
  end
end
local stored, live = raw ~= false, start ~= nil
--- @include "one-drop"

-- A live state is the current window (a clock that stepped backwards stays in it); else a fresh one.
if start == nil then
  start, count = now, 0
end
local finish = start + window
local allowed = count + cost <= limit
local retry = 0
if not allowed then
  retry = finish - now
end

if allowed and not peek and not held then
  count = count + cost
  -- finish > now: a live window ends after now, a fresh one at now + window.
  redis.call('PSETEX', key, string.format('%d', finish - now + slack), string.format('%d:%d', start, count))
end
local reset = 0
if count > 0 then
  reset = finish - now
end
local remaining = math.max(0, limit - count)
--- @include "one-reply"
