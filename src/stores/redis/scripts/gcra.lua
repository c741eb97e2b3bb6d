-- GCRA, twin of src/algorithms/gcra.ts.
-- Stored value: "tatMs:tatRem" (the theoretical arrival time in whole ms plus a remainder in
-- 1/limit ms), or just "tatMs" when the remainder is 0. Meaningful until the TAT has passed: tatMs + (tatRem > 0 and 1 or 0).

local gcra = {}

local function gcra_expires_at(state)
  if state.rem > 0 then
    return state.ms + 1
  end
  return state.ms
end

function gcra.read(step, now, keep_dead)
  local raw = redis.call('GET', step.key)
  if not raw then
    return nil
  end
  local v = unpack_numbers(raw)
  local state = { ms = v[1], rem = v[2] or 0 }
  if gcra_expires_at(state) <= now then
    if not keep_dead then
      redis.call('DEL', step.key)
    end
    return nil
  end
  return state
end

-- The later of the stored TAT and now.
local function gcra_base(state, now)
  if state == nil or state.ms < now then
    return { ms = now, rem = 0 }
  end
  return state
end

-- How far the TAT is ahead of now, in 1/limit ms (= units spent x window).
local function gcra_debt(tat, limit, now)
  return (tat.ms - now) * limit + tat.rem
end

local function gcra_shift(tat, limit, delta)
  local total = tat.rem + delta
  local whole = math.floor(total / limit)
  return { ms = tat.ms + whole, rem = total - whole * limit }
end

function gcra.consume(step, state, now, peek)
  local w = step.window
  local full = step.capacity * w
  local tat = gcra_base(state, now)
  local before = gcra_debt(tat, step.limit, now)
  local allowed = before + step.cost * w <= full
  local nxt = tat
  local after = before
  if allowed and not peek then
    nxt = gcra_shift(tat, step.limit, step.cost * w)
    after = before + step.cost * w
  end
  local r = {
    allowed = allowed,
    state = nxt,
    remaining = math.max(0, math.floor((full - after) / w)),
    retry = 0,
    reset = math.ceil(after / step.limit),
  }
  if not allowed then
    r.retry = math.ceil((before + step.cost * w - full) / step.limit)
  end
  return r
end

function gcra.save(step, state, now, slack)
  -- With no remainder (window a multiple of limit / cost) the value is one integer, which Redis
  -- stores inside the key's object (int encoding): no separate string allocation.
  local value = int(state.ms)
  if state.rem ~= 0 then
    value = value .. ':' .. int(state.rem)
  end
  save_string(step, value, gcra_expires_at(state), now, slack)
end

function gcra.refund(step, state, now, amount, slack)
  local tat = gcra_base(state, now)
  local owed = gcra_debt(tat, step.limit, now)
  local nxt = gcra_shift(tat, step.limit, -math.min(owed, amount * step.window))
  if gcra_debt(nxt, step.limit, now) <= 0 then
    redis.call('DEL', step.key)
  else
    gcra.save(step, nxt, now, slack)
  end
end

ALGORITHMS['gcra'] = gcra
