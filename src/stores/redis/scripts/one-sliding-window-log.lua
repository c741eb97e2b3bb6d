-- Sluice apply for sliding-window-log steps, flat: the same decision as apply.lua with
-- sliding-window-log.lua (its twin; src/algorithms/sliding-window-log.ts), inlined for the common
-- single-policy call. Keep them in step: the conformance vectors and the differential test run both.

local STRIDE, CAPACITY = 3, false
--- @include "one-prelude"

-- The list of sliding-window-log.lua: [start, time 1, total 1, time 2, total 2, ...], oldest first,
-- one (time, running total of units) pair per admitted request; totals wrap at TOTAL_MODULUS. Live
-- until the newest entry + window. `first` is the index (0-based) of the oldest entry still in the
-- window, `start` the total before it, `count` the live units.
local TOTAL_MODULUS = 549755813888 -- 2^39, as in sliding-window-log.lua
local first, start, count, newest, total, first_total, entries = 0, 0, 0, nil, 0, nil, nil
-- One read serves a key of one entry ([start, time, total]); a fourth element says there are more.
local head = redis.call('LRANGE', key, 0, 3)
local stored = #head > 0
-- A list that starts with a time (>= TOTAL_MODULUS) is the per-unit layout of earlier versions: it
-- reads as no state, so one-drop.lua deletes it, as after a reset.
if stored and head[1] + 0 < TOTAL_MODULUS then
  if #head == 3 then
    newest, total = head[2] + 0, head[3]
  else
    local tail = redis.call('LRANGE', key, -2, -1)
    newest, total = tail[1] + 0, tail[2]
  end
  if newest + window <= now then
    newest = nil
  else
    total = total + 0
    if head[2] + window > now then
      -- The oldest entry is still in the window, so all are: no search.
      start, first_total = head[1] + 0, head[3] + 0
    else
      -- The oldest entry has left the window: search for the first that has not.
      entries = (redis.call('LLEN', key) - 1) / 2
      local lo, hi = 1, entries - 1
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        if redis.call('LINDEX', key, 2 * mid + 1) + window <= now then
          lo = mid + 1
        else
          hi = mid
        end
      end
      first = lo
      start = redis.call('LINDEX', key, 2 * first) + 0
    end
    count = total - start
    if count < 0 then
      count = count + TOTAL_MODULUS
    end
  end
end
local live = newest ~= nil
--- @include "one-drop"

-- A clock that stepped backwards records at the newest time seen, keeping the log ordered.
local at = now
if count > 0 then
  at = math.max(now, newest)
end
local allowed = count + cost <= limit
local retry = 0
if not allowed and count > 0 then
  -- Wait until enough of the oldest units leave the window for `cost` to fit: the time of the entry
  -- holding the `need`-th oldest live unit (an entry's units all leave together).
  local need = count + cost - limit
  local held_by, search, lo = first, true, first
  if first_total ~= nil then
    -- The oldest live entry was read already: often it alone is enough.
    local units = first_total - start
    if units < 0 then
      units = units + TOTAL_MODULUS
    end
    search, lo = units < need, first + 1
  end
  if search then
    entries = entries or (redis.call('LLEN', key) - 1) / 2
    local hi = entries - 1
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      local units = redis.call('LINDEX', key, 2 * mid + 2) - start
      if units < 0 then
        units = units + TOTAL_MODULUS
      end
      if units >= need then
        hi = mid
      else
        lo = mid + 1
      end
    end
    held_by = math.min(lo, hi)
  end
  -- Entry 0's time was read with the head.
  local held_at = held_by == 0 and head[2] or redis.call('LINDEX', key, 2 * held_by + 1)
  retry = held_at + window - now
end

if allowed and not peek and not held and cost > 0 then
  -- Commit: drop what left the window, add `cost` units at `at` (to the newest entry when it is at
  -- that time).
  if count == 0 then
    -- A fresh list: start 0, then this entry, whose total is the cost as the caller wrote it.
    redis.call('RPUSH', key, '0', string.format('%d', at), ARGV[a + cost_at])
  else
    if first > 0 then
      redis.call('LTRIM', key, 2 * first, -1)
    end
    local sum = string.format('%d', (total + cost) % TOTAL_MODULUS)
    if at == newest then
      redis.call('LSET', key, '-1', sum)
    else
      redis.call('RPUSH', key, string.format('%d', at), sum)
    end
  end
  count = count + cost
  newest = at
  redis.call('PEXPIRE', key, string.format('%d', at + window - now + slack))
end
local reset = 0
if newest ~= nil then
  reset = newest + window - now
end
local remaining = math.max(0, limit - count)
--- @include "one-reply"
