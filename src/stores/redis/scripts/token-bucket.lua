-- Token bucket, twin of src/algorithms/token-bucket.ts.
-- State: level = tokens x window (an integer below full = capacity x window) at time `at` (ms).
-- Meaningful until the bucket is full again: at + ceil((full - level) / limit).
-- Stored value, packed when it fits: one 19-digit decimal integer that Redis keeps inside the key
-- object (int encoding, no separate string): "1", then level in D digits (D = digits of full), then
-- at modulo 10^K in K = 18 - D digits. `at` is recovered as the value with that remainder nearest to
-- now, which is exact while |at - now| < 10^K / 2: a live key has at > now - ceil(full / limit), and
-- packing is used only when that span plus one day (a clock stepping back) fits. Otherwise the value
-- is the text "level:at". The layout depends on capacity x window: changing them reads old keys wrong
-- for at most their remaining life.

local token_bucket = {}
local TB_CLOCK_BACK_MS = 86400000

-- The packed layout for a step: level digits, `at` digits and 10^K, or nil when it does not fit.
local function token_bucket_layout(step)
  local full = step.capacity * step.window
  local d = #int(full)
  local k = 18 - d
  if k < 1 then
    return nil
  end
  local m = 10 ^ k
  if 2 * (math.ceil(full / step.limit) + TB_CLOCK_BACK_MS) >= m then
    return nil
  end
  return d, k, m
end

local function token_bucket_decode(step, raw, now)
  if string.find(raw, ':', 1, true) then
    local v = unpack_numbers(raw)
    return { level = v[1], at = v[2] }
  end
  local d, k, m = token_bucket_layout(step)
  if d == nil or #raw ~= 1 + d + k then
    return nil
  end
  local level = tonumber(string.sub(raw, 2, 1 + d))
  local r = tonumber(string.sub(raw, 2 + d))
  return { level = level, at = r + m * math.floor((now - r) / m + 0.5) }
end

local function token_bucket_encode(step, state)
  local d, k, m = token_bucket_layout(step)
  if d == nil or state.level < 0 then
    return int(state.level) .. ':' .. int(state.at)
  end
  local r = state.at % m
  if r < 0 then
    r = r + m
  elseif r >= m then
    r = r - m
  end
  return '1' .. string.format('%0' .. d .. '.0f', state.level) .. string.format('%0' .. k .. '.0f', r)
end

local function token_bucket_full_at(step, state)
  return state.at + math.ceil((step.capacity * step.window - state.level) / step.limit)
end

function token_bucket.read(step, now, keep_dead)
  local raw = redis.call('GET', step.key)
  if not raw then
    return nil
  end
  local state = token_bucket_decode(step, raw, now)
  if state == nil or state.level >= step.capacity * step.window or token_bucket_full_at(step, state) <= now then
    if not keep_dead then
      redis.call('DEL', step.key)
    end
    return nil
  end
  return state
end

local function token_bucket_refill(state, limit, full, now)
  if state == nil then
    return { level = full, at = now }
  end
  -- A clock that stepped backwards refills nothing and keeps the newest time seen.
  local at = math.max(now, state.at)
  return { level = math.min(full, state.level + (at - state.at) * limit), at = at }
end

function token_bucket.consume(step, state, now, peek)
  local w = step.window
  local full = step.capacity * w
  local cur = token_bucket_refill(state, step.limit, full, now)
  local need = step.cost * w
  local allowed = cur.level >= need
  local level = cur.level
  if allowed and not peek then
    level = cur.level - need
  end
  local lag = cur.at - now
  local r = {
    allowed = allowed,
    state = { level = level, at = cur.at },
    remaining = math.floor(level / w),
    retry = 0,
    reset = 0,
  }
  if not allowed then
    r.retry = lag + math.ceil((need - cur.level) / step.limit)
  end
  if level < full then
    r.reset = lag + math.ceil((full - level) / step.limit)
  end
  return r
end

function token_bucket.save(step, state, now, slack)
  if state.level >= step.capacity * step.window then
    redis.call('DEL', step.key)
    return
  end
  save_string(step, token_bucket_encode(step, state), token_bucket_full_at(step, state), now, slack)
end

function token_bucket.refund(step, state, now, amount, slack)
  local full = step.capacity * step.window
  local cur = token_bucket_refill(state, step.limit, full, now)
  local level = math.min(full, cur.level + amount * step.window)
  token_bucket.save(step, { level = level, at = cur.at }, now, slack)
end

ALGORITHMS['token-bucket'] = token_bucket
