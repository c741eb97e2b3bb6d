-- Sliding window log, twin of src/algorithms/sliding-window-log.ts.
-- Stored as a list of admission times (ms), oldest first, one element per unit of cost.
-- Expired entries are trimmed only when a consume or refund commits, like the TypeScript state.
-- Meaningful until the newest entry + window.

local sliding_window_log = {}

function sliding_window_log.read(step, now, keep_dead)
  local len = redis.call('LLEN', step.key)
  if len == 0 then
    return nil
  end
  local newest = tonumber(redis.call('LINDEX', step.key, -1))
  if newest + step.window <= now then
    if not keep_dead then
      redis.call('DEL', step.key)
    end
    return nil
  end
  -- Entries are ordered. When the oldest is still inside the window, all are (one LINDEX);
  -- otherwise binary search for the first one that is.
  if len == 1 or tonumber(redis.call('LINDEX', step.key, 0)) + step.window > now then
    return { first = 0, count = len, newest = newest }
  end
  local lo, hi = 1, len - 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if tonumber(redis.call('LINDEX', step.key, mid)) + step.window <= now then
      lo = mid + 1
    else
      hi = mid
    end
  end
  return { first = lo, count = len - lo, newest = newest }
end

function sliding_window_log.consume(step, state, now, peek)
  local count, newest, first = 0, nil, 0
  if state ~= nil then
    count, newest, first = state.count, state.newest, state.first
  end
  -- A clock that stepped backwards records at the newest time seen, keeping the log ordered.
  local at = now
  if count > 0 then
    at = math.max(now, newest)
  end
  local allowed = count + step.cost <= step.limit
  local after = count
  if allowed and not peek then
    after = count + step.cost
    newest = at
  end
  local r = {
    allowed = allowed,
    state = { first = first, count = count, at = at },
    remaining = math.max(0, step.limit - after),
    retry = 0,
    reset = 0,
  }
  if not allowed then
    -- Wait until enough of the oldest entries leave the window for `cost` to fit.
    local index = first + count + step.cost - step.limit - 1
    r.retry = tonumber(redis.call('LINDEX', step.key, index)) + step.window - now
  end
  if newest ~= nil then
    r.reset = newest + step.window - now
  end
  return r
end

-- Commit: drop what left the window, append `cost` entries at `state.at`.
function sliding_window_log.save(step, state, now, slack)
  if state.first > 0 then
    redis.call('LTRIM', step.key, state.first, -1)
  end
  local pending = step.cost
  local chunk = {}
  local at = int(state.at)
  while pending > 0 do
    local n = math.min(pending, 1000)
    if #chunk ~= n then
      chunk = {}
      for i = 1, n do
        chunk[i] = at
      end
    end
    redis.call('RPUSH', step.key, unpack(chunk))
    pending = pending - n
  end
  redis.call('PEXPIRE', step.key, int(state.at + step.window - now + slack))
end

-- Give back the newest units: a refund usually follows the consume it undoes.
function sliding_window_log.refund(step, state, now, amount, slack)
  local keep = math.max(0, state.count - amount)
  if keep == 0 then
    redis.call('DEL', step.key)
    return
  end
  redis.call('LTRIM', step.key, state.first, state.first + keep - 1)
  local newest = tonumber(redis.call('LINDEX', step.key, -1))
  redis.call('PEXPIRE', step.key, int(newest + step.window - now + slack))
end

ALGORITHMS['sliding-window-log'] = sliding_window_log
