-- Token bucket, twin of src/algorithms/token-bucket.ts.
-- Stored value: "level:at" where level = tokens x window (an integer). Meaningful until the bucket
-- is full again: at + ceil((capacity x window - level) / limit).

local token_bucket = {}

local function token_bucket_full_at(step, state)
  return state.at + math.ceil((step.capacity * step.window - state.level) / step.limit)
end

function token_bucket.read(step, now, keep_dead)
  local raw = redis.call('GET', step.key)
  if not raw then
    return nil
  end
  local v = unpack_numbers(raw)
  local state = { level = v[1], at = v[2] }
  if state.level >= step.capacity * step.window or token_bucket_full_at(step, state) <= now then
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
  save_string(step, int(state.level) .. ':' .. int(state.at), token_bucket_full_at(step, state), now, slack)
end

function token_bucket.refund(step, state, now, amount, slack)
  local full = step.capacity * step.window
  local cur = token_bucket_refill(state, step.limit, full, now)
  local level = math.min(full, cur.level + amount * step.window)
  token_bucket.save(step, { level = level, at = cur.at }, now, slack)
end

ALGORITHMS['token-bucket'] = token_bucket
