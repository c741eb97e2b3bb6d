-- Sliding window counter, twin of src/algorithms/sliding-window-counter.ts.
-- Stored value: "start:previous:current" (start is a multiple of the window). Meaningful until
-- start + 2 x window while current > 0, else until start + window while previous > 0.

local sliding_window_counter = {}

local function swc_expires_at(step, state)
  if state.current > 0 then
    return state.start + 2 * step.window
  end
  if state.previous > 0 then
    return state.start + step.window
  end
  return state.start
end

function sliding_window_counter.read(step, now, keep_dead)
  local raw = redis.call('GET', step.key)
  if not raw then
    return nil
  end
  local v = unpack_numbers(raw)
  local state = { start = v[1], previous = v[2], current = v[3] }
  if swc_expires_at(step, state) <= now then
    if not keep_dead then
      redis.call('DEL', step.key)
    end
    return nil
  end
  return state
end

local function swc_view(state, w, now)
  local start = math.floor(now / w) * w
  if state == nil or start >= state.start + 2 * w then
    return { start = start, previous = 0, current = 0, elapsed = now - start }
  end
  if start < state.start then
    -- The clock stepped backwards: stay at the start of the stored window, the most conservative point.
    return { start = state.start, previous = state.previous, current = state.current, elapsed = 0 }
  end
  if start == state.start then
    return { start = start, previous = state.previous, current = state.current, elapsed = now - start }
  end
  return { start = start, previous = state.current, current = 0, elapsed = now - start }
end

function sliding_window_counter.consume(step, state, now, peek)
  local w = step.window
  local limit = step.limit
  local cost = step.cost
  local v = swc_view(state, w, now)
  -- used x w = previous x (w - elapsed) + current x w
  local used = v.previous * (w - v.elapsed) + v.current * w
  local allowed = used + cost * w <= limit * w
  local current = v.current
  if allowed and not peek then
    current = v.current + cost
  end
  local used_after = v.previous * (w - v.elapsed) + current * w
  local retry = 0
  if not allowed then
    retry = v.start + v.elapsed - now
    local room = limit - v.current - cost
    if room >= 0 then
      retry = retry + w - v.elapsed - math.floor((room * w) / v.previous)
    else
      retry = retry + w - v.elapsed + (w - math.floor(((limit - cost) * w) / v.current))
    end
  end
  local base = v.start - now
  local reset = 0
  if current > 0 then
    reset = base + 2 * w
  elseif v.previous > 0 then
    reset = base + w
  end
  return {
    allowed = allowed,
    state = { start = v.start, previous = v.previous, current = current },
    remaining = math.max(0, math.floor((limit * w - used_after) / w)),
    retry = retry,
    reset = reset,
  }
end

function sliding_window_counter.save(step, state, now, slack)
  local value = int(state.start) .. ':' .. int(state.previous) .. ':' .. int(state.current)
  save_string(step, value, swc_expires_at(step, state), now, slack)
end

function sliding_window_counter.refund(step, state, now, amount, slack)
  local v = swc_view(state, step.window, now)
  local current = math.max(0, v.current - amount)
  local previous = math.max(0, v.previous - math.max(0, amount - v.current))
  if current == 0 and previous == 0 then
    redis.call('DEL', step.key)
  else
    sliding_window_counter.save(step, { start = v.start, previous = previous, current = current }, now, slack)
  end
end

ALGORITHMS['sliding-window-counter'] = sliding_window_counter
