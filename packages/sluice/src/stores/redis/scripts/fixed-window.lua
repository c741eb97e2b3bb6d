-- Fixed window, twin of src/algorithms/fixed-window.ts, as sections over the locals the
-- scripts set (README.md beside this file).
-- State "start:count:span", live until the window ends: start + window, or start + span when that
-- is sooner (the window was opened under a shorter one; a longer window applies from the next).
-- A value of two fields, "start:count", ends at start + window.
--- @args limit window cost
--- @carry start count finish

--- @section read
local start, count, finish
--- @include "shared/get-state"
if raw then
  local c1 = string.find(raw, ':', 1, true)
  local c2 = string.find(raw, ':', c1 + 1, true)
  start = string.sub(raw, 1, c1 - 1) + 0
  finish = start + window
  if c2 then
    count = string.sub(raw, c1 + 1, c2 - 1) + 0
    local span = string.sub(raw, c2 + 1) + 0
    if span < window then
      finish = start + span
    end
  else
    count = string.sub(raw, c1 + 1) + 0
  end
  if finish <= now then
    start = nil
  end
end
local stored, live = raw ~= false, start ~= nil

--- @section decide
-- A live state is the current window (a clock that stepped backwards stays in it); else a fresh one.
if start == nil then
  start, count, finish = now, 0, now + window
end
local allowed = count + cost <= limit
local retry = 0
if not allowed then
  retry = finish - now
end

--- @section commit
count = count + cost
-- finish > now: a live window ends after now, a fresh one at now + window.
local value = string.format('%d:%d:%d', start, count, finish - start)
redis.call('PSETEX', key, string.format('%d', finish - now + slack), value)

--- @section report
local reset = 0
if count > 0 then
  reset = finish - now
end
local remaining = math.max(0, limit - count)

--- @section refund
count = math.max(0, count - cost)
if count == 0 then
  redis.call('DEL', key)
else
  local value = string.format('%d:%d:%d', start, count, finish - start)
  redis.call('PSETEX', key, string.format('%d', finish - now + slack), value)
end
