-- Sliding window log, twin of src/algorithms/sliding-window-log.ts, as sections over the locals
-- the scripts set (README.md beside this file).
-- Stored as a list: the running total of units before the oldest entry with the log's span, then per
-- admitted request (requests admitted in the same ms share one) its time (ms) and the running total
-- up to and including it: ["start:span", time 1, total 1, time 2, total 2, ...], oldest first. Totals
-- wrap at TOTAL_MODULUS (2^39). So a key holds one pair per admitted request, whatever the request
-- cost, and dropping the k oldest entries is one LTRIM from index 2k (the last dropped total becomes
-- the start). Expired entries are trimmed only when a consume or refund commits, like the TypeScript
-- state. Live until the newest entry + span (the window it was written under, or less after a
-- refund); an entry leaves at its time + window, or at that end if sooner. A head without a span
-- ("start") ends at the newest entry + window.
--- @args limit window cost
--- @carry TOTAL_MODULUS first start count newest total at log_end span

--- @section read
-- Twin of LOG_TOTAL_MODULUS in src/algorithms/sliding-window-log.ts: totals stay small and exact,
-- and below any time since 1987, so a list that starts with a number >= TOTAL_MODULUS (a time, not
-- a total) is not a log of this layout: it reads as no state and is replaced, never misread.
local TOTAL_MODULUS = 549755813888 -- 2^39
-- `first` is the index (0-based) of the oldest entry still in the window, `start` the total before
-- it, `count` the live units; `first_total` (the oldest live entry's total) is known when that entry
-- is the list's first, `entries` (the entry count) when it was needed; `log_end` is when the log
-- ends, its newest entry + `span`.
local first, start, count, newest, total, first_total, entries = 0, 0, 0, nil, 0, nil, nil
local log_end, span
-- One read serves a key of one entry ([start, time, total]); a fourth element says there are more.
local head = call('LRANGE', key, 0, 3)
local stored = #head > 0
local head_start
if stored then
  local colon = find(head[1], ':', 1, true)
  if colon then
    head_start, span = sub(head[1], 1, colon - 1) + 0, sub(head[1], colon + 1) + 0
  else
    head_start, span = head[1] + 0, window
  end
end
-- A list that starts with a time (>= TOTAL_MODULUS) is not in this layout: it reads as no state, so
-- it is deleted, as after a reset.
if stored and head_start < TOTAL_MODULUS then
  if #head == 3 then
    newest, total = head[2] + 0, head[3]
  else
    local tail = call('LRANGE', key, -2, -1)
    newest, total = tail[1] + 0, tail[2]
  end
  log_end = newest + span
  if newest + window <= now or log_end <= now then
    newest = nil
  else
    total = total + 0
    if head[2] + window > now then
      -- The oldest entry is still in the window, so all are: no search.
      start, first_total = head_start, head[3] + 0
    else
      -- The oldest entry has left the window: search for the first that has not.
      entries = (call('LLEN', key) - 1) / 2
      local lo, hi = 1, entries - 1
      while lo < hi do
        local mid = floor((lo + hi) / 2)
        if call('LINDEX', key, 2 * mid + 1) + window <= now then
          lo = mid + 1
        else
          hi = mid
        end
      end
      first = lo
      start = call('LINDEX', key, 2 * first) + 0
    end
    count = total - start
    if count < 0 then
      count = count + TOTAL_MODULUS
    end
  end
end
local live = newest ~= nil

--- @section holding
-- holder: the index of the live entry holding the `need`-th oldest live unit (need >= 1).
local holder, search, lo = first, true, first
if first_total ~= nil then
  -- The oldest live entry was read already: often it alone is enough.
  local units = first_total - start
  if units < 0 then
    units = units + TOTAL_MODULUS
  end
  search, lo = units < need, first + 1
end
if search then
  entries = entries or (call('LLEN', key) - 1) / 2
  local hi = entries - 1
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    local units = call('LINDEX', key, 2 * mid + 2) - start
    if units < 0 then
      units = units + TOTAL_MODULUS
    end
    if units >= need then
      hi = mid
    else
      lo = mid + 1
    end
  end
  holder = lo < hi and lo or hi
end

--- @section decide
-- A clock that stepped backwards records at the newest time seen, keeping the log ordered.
local at = now
if count > 0 then
  if newest > now then
    at = newest
  end
end
local allowed = count + cost <= limit
local retry = 0
if not allowed and count > 0 then
  -- Wait until enough of the oldest units leave the window for `cost` to fit: the time of the entry
  -- holding the `need`-th oldest live unit (an entry's units all leave together).
  local need = count + cost - limit
  --- @include "holding"
  -- Entry 0's time was read with the head.
  local holder_at = holder == 0 and head[2] or call('LINDEX', key, 2 * holder + 1)
  retry = holder_at + window
  if log_end < retry then
    retry = log_end
  end
  retry = retry - now
end

--- @section commit
if cost > 0 then
  -- Drop what left the window, add `cost` units at `at` (to the newest entry when it is at that time).
  if count == 0 then
    -- A fresh list: start 0, then this entry.
    call('RPUSH', key, format('0:%d', window), format('%d', at), format('%d', cost))
  else
    if first > 0 then
      call('LTRIM', key, 2 * first, -1)
    end
    local sum = format('%d', (total + cost) % TOTAL_MODULUS)
    if at == newest then
      call('LSET', key, '-1', sum)
    else
      call('RPUSH', key, format('%d', at), sum)
    end
    -- The log now ends a window after this entry: a trimmed head (a bare total) or another span
    -- is rewritten.
    if first > 0 or span ~= window then
      call('LSET', key, '0', format('%d:%d', start, window))
    end
  end
  count = count + cost
  newest, log_end = at, at + window
  call('PEXPIRE', key, format('%d', at + window - now + slack))
end

--- @section report
local reset = 0
if newest ~= nil then
  reset = newest + window
  if log_end < reset then
    reset = log_end
  end
  reset = reset - now
end
local remaining = limit - count
if remaining < 0 then
  remaining = 0
end

--- @section refund
-- Give back the newest units: a refund usually follows the consume it undoes. The entry holding the
-- last unit kept becomes the newest, shrunk to what is kept of it.
local need = count - cost
if need <= 0 then
  call('DEL', key)
else
  --- @include "holding"
  call('LTRIM', key, 2 * first, 2 * holder + 2)
  call('LSET', key, '-1', format('%d', (start + need) % TOTAL_MODULUS))
  -- The log ends a window after its new newest entry, never later than it was to.
  local kept = call('LINDEX', key, -2) + 0
  local ends = kept + window
  if log_end < ends then
    ends = log_end
  end
  call('LSET', key, '0', format('%d:%d', start, ends - kept))
  call('PEXPIRE', key, format('%d', ends - now + slack))
end
