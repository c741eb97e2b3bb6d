-- Sluice apply for sliding-window-log steps, flat: the same decision as apply.lua with
-- sliding-window-log.lua (its twin; src/algorithms/sliding-window-log.ts), inlined for the common
-- single-policy call. Keep them in step: the conformance vectors and the differential test run both.

local STRIDE, CAPACITY = 3, false
--- @include "one-prelude"

-- A list of admission times (ms), oldest first, one element per unit (sliding-window-log.lua); live
-- until the newest entry + window. `first` is the index of the oldest entry still in the window.
local first, count, newest = 0, 0, nil
local len = redis.call('LLEN', key)
if len > 0 then
  newest = redis.call('LINDEX', key, '-1') + 0
  if newest + window <= now then
    newest = nil
  elseif len == 1 or redis.call('LINDEX', key, '0') + window > now then
    -- The oldest entry is still in the window, so all are: one LINDEX instead of a search.
    first, count = 0, len
  else
    -- The oldest entry has left the window: search for the first that has not.
    local lo, hi = 1, len - 1
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if redis.call('LINDEX', key, mid) + window <= now then
        lo = mid + 1
      else
        hi = mid
      end
    end
    first, count = lo, len - lo
  end
end
local stored, live = len > 0, newest ~= nil
--- @include "one-drop"

-- A clock that stepped backwards records at the newest time seen, keeping the log ordered.
local at = now
if count > 0 then
  at = math.max(now, newest)
end
local allowed = count + cost <= limit
local retry = 0
if not allowed then
  -- Wait until enough of the oldest entries leave the window for `cost` to fit.
  retry = redis.call('LINDEX', key, first + count + cost - limit - 1) + window - now
end

if allowed and not peek and not held then
  count = count + cost
  newest = at
  -- Commit: drop what left the window, append `cost` entries at `at`.
  if first > 0 then
    redis.call('LTRIM', key, first, -1)
  end
  local entry = string.format('%d', at)
  if cost == 1 then
    redis.call('RPUSH', key, entry)
  else
    local pending = cost
    local chunk = {}
    while pending > 0 do
      local n = math.min(pending, 1000)
      if #chunk ~= n then
        chunk = {}
        for i = 1, n do
          chunk[i] = entry
        end
      end
      redis.call('RPUSH', key, unpack(chunk))
      pending = pending - n
    end
  end
  redis.call('PEXPIRE', key, string.format('%d', at + window - now + slack))
end
local reset = 0
if newest ~= nil then
  reset = newest + window - now
end
local remaining = math.max(0, limit - count)
--- @include "one-reply"
