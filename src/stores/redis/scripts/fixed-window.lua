-- Fixed window, twin of src/algorithms/fixed-window.ts.
-- Stored value: "start:count" (string). Meaningful until start + window.

local fixed_window = {}

function fixed_window.read(step, now, keep_dead)
  local raw = redis.call('GET', step.key)
  if not raw then
    return nil
  end
  local v = unpack_numbers(raw)
  local state = { start = v[1], count = v[2] }
  if state.start + step.window <= now then
    if not keep_dead then
      redis.call('DEL', step.key)
    end
    return nil
  end
  return state
end

local function fixed_window_current(state, window, now)
  -- A clock that stepped backwards stays in the stored window: it never opens a fresh one.
  if state == nil or now >= state.start + window then
    return { start = now, count = 0 }
  end
  return state
end

function fixed_window.consume(step, state, now, peek)
  local w = fixed_window_current(state, step.window, now)
  local finish = w.start + step.window
  local allowed = w.count + step.cost <= step.limit
  local count = w.count
  if allowed and not peek then
    count = w.count + step.cost
  end
  local r = {
    allowed = allowed,
    state = { start = w.start, count = count },
    remaining = math.max(0, step.limit - count),
    retry = 0,
    reset = 0,
  }
  if not allowed then
    r.retry = finish - now
  end
  if count > 0 then
    r.reset = finish - now
  end
  return r
end

function fixed_window.save(step, state, now, slack)
  save_string(step, int(state.start) .. ':' .. int(state.count), state.start + step.window, now, slack)
end

function fixed_window.refund(step, state, now, amount, slack)
  local w = fixed_window_current(state, step.window, now)
  local count = math.max(0, w.count - amount)
  if count == 0 then
    redis.call('DEL', step.key)
  else
    fixed_window.save(step, { start = w.start, count = count }, now, slack)
  end
end

ALGORITHMS['fixed-window'] = fixed_window
