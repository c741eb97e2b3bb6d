-- Sliding window log, twin of src/algorithms/sliding-window-log.ts.
-- Stored as a list: the running total of units before the oldest entry, then per admitted request
-- (requests admitted in the same ms share one) its time (ms) and the running total up to and
-- including it: [start, time 1, total 1, time 2, total 2, ...], oldest first. Totals wrap at
-- TOTAL_MODULUS (2^39). So a key holds one pair per admitted request, whatever the request cost, and
-- dropping the k oldest entries is one LTRIM from index 2k (the last dropped total becomes the start).
-- Expired entries are trimmed only when a consume or refund commits, like the TypeScript state.
-- Meaningful until the newest entry + window.

local sliding_window_log = {}

-- Twin of LOG_TOTAL_MODULUS in src/algorithms/sliding-window-log.ts: totals stay small and exact,
-- and below any time since 1987, so a list that starts with a number >= TOTAL_MODULUS (a time) is
-- the one-time-per-unit list of earlier versions: it reads as no state and is replaced.
local TOTAL_MODULUS = 549755813888 -- 2^39

-- Units admitted between running totals `from` and `to`.
local function log_between(from, to)
  local units = to - from
  if units < 0 then
    units = units + TOTAL_MODULUS
  end
  return units
end

-- The live part of the log: first (index of the oldest live entry, 0-based), start (the total before
-- it), count (live units), newest (time), total (the newest total), and when already read the oldest
-- live entry's time and total (first_time, first_total) and the entry count (entries).
function sliding_window_log.read(step, now, keep_dead)
  -- One read serves a key of one entry ([start, time, total]); a fourth element says there are more.
  local head = redis.call('LRANGE', step.key, 0, 3)
  if #head == 0 then
    return nil
  end
  if tonumber(head[1]) >= TOTAL_MODULUS then
    -- The per-unit layout of earlier versions (a time first): forgotten, as after a reset.
    if not keep_dead then
      redis.call('DEL', step.key)
    end
    return nil
  end
  local newest, total
  if #head == 3 then
    newest, total = tonumber(head[2]), tonumber(head[3])
  else
    local tail = redis.call('LRANGE', step.key, -2, -1)
    newest, total = tonumber(tail[1]), tonumber(tail[2])
  end
  if newest + step.window <= now then
    if not keep_dead then
      redis.call('DEL', step.key)
    end
    return nil
  end
  -- Entries are ordered. When the oldest is still inside the window, all are (no search);
  -- otherwise binary search for the first one that is.
  if tonumber(head[2]) + step.window > now then
    local start = tonumber(head[1])
    return {
      first = 0,
      start = start,
      count = log_between(start, total),
      newest = newest,
      total = total,
      first_time = tonumber(head[2]),
      first_total = tonumber(head[3]),
    }
  end
  local entries = (redis.call('LLEN', step.key) - 1) / 2
  local lo, hi = 1, entries - 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if tonumber(redis.call('LINDEX', step.key, 2 * mid + 1)) + step.window <= now then
      lo = mid + 1
    else
      hi = mid
    end
  end
  local start = tonumber(redis.call('LINDEX', step.key, 2 * lo))
  return {
    first = lo,
    start = start,
    count = log_between(start, total),
    newest = newest,
    total = total,
    entries = entries,
  }
end

-- Index of the live entry holding the `units`-th oldest live unit, and its time.
local function log_holding(step, state, units)
  local lo = state.first
  if state.first_total ~= nil then
    -- The oldest live entry was read already: often it alone is enough.
    if log_between(state.start, state.first_total) >= units then
      return lo
    end
    lo = lo + 1
  end
  local entries = state.entries or (redis.call('LLEN', step.key) - 1) / 2
  local hi = entries - 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if log_between(state.start, tonumber(redis.call('LINDEX', step.key, 2 * mid + 2))) >= units then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return math.min(lo, hi)
end

local function log_time(step, state, index)
  if index == 0 and state.first_time ~= nil then
    return state.first_time
  end
  return tonumber(redis.call('LINDEX', step.key, 2 * index + 1))
end

function sliding_window_log.consume(step, state, now, peek)
  local count, newest = 0, nil
  if state ~= nil then
    count, newest = state.count, state.newest
  end
  -- A clock that stepped backwards records at the newest time seen, keeping the log ordered.
  local at = now
  if count > 0 then
    at = math.max(now, newest)
  end
  local allowed = count + step.cost <= step.limit
  local after = count
  if allowed and not peek and step.cost > 0 then
    after = count + step.cost
    newest = at
  end
  local r = {
    allowed = allowed,
    state = { log = state, at = at },
    remaining = math.max(0, step.limit - after),
    retry = 0,
    reset = 0,
  }
  if not allowed and count > 0 then
    -- Wait until enough of the oldest units leave the window for `cost` to fit. An entry's units all
    -- leave together, at its time + window.
    local index = log_holding(step, state, count + step.cost - step.limit)
    r.retry = log_time(step, state, index) + step.window - now
  end
  if newest ~= nil then
    r.reset = newest + step.window - now
  end
  return r
end

-- Commit: drop what left the window, add `cost` units at `state.at` (to the newest entry when it is
-- at that time).
function sliding_window_log.save(step, state, now, slack)
  if step.cost == 0 then
    return
  end
  local log, at = state.log, int(state.at)
  if log == nil then
    redis.call('RPUSH', step.key, '0', at, int(step.cost))
  else
    if log.first > 0 then
      redis.call('LTRIM', step.key, 2 * log.first, -1)
    end
    local total = int((log.total + step.cost) % TOTAL_MODULUS)
    if state.at == log.newest then
      redis.call('LSET', step.key, -1, total)
    else
      redis.call('RPUSH', step.key, at, total)
    end
  end
  redis.call('PEXPIRE', step.key, int(state.at + step.window - now + slack))
end

-- Give back the newest units: a refund usually follows the consume it undoes. The entry holding the
-- last unit kept becomes the newest, shrunk to what is kept of it.
function sliding_window_log.refund(step, state, now, amount, slack)
  local keep = state.count - amount
  if keep <= 0 then
    redis.call('DEL', step.key)
    return
  end
  local last = log_holding(step, state, keep)
  redis.call('LTRIM', step.key, 2 * state.first, 2 * last + 2)
  redis.call('LSET', step.key, -1, int((state.start + keep) % TOTAL_MODULUS))
  local newest = tonumber(redis.call('LINDEX', step.key, -2))
  redis.call('PEXPIRE', step.key, int(newest + step.window - now + slack))
end

ALGORITHMS['sliding-window-log'] = sliding_window_log
