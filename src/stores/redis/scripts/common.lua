-- Shared helpers for every Sluice script. Included at build time (--- @include "common").
-- A step is a table: key (state), blockKey, limit, window (ms), capacity, cost, lease.
-- `slack` is extra TTL (ms) in client clock mode, where host clocks may lag the Redis clock.

local ALGORITHMS = {}

-- Whole numbers up to 2^53 as exact decimal text (tostring would switch to exponents).
local function int(n)
  return string.format('%.0f', n)
end

-- "a:b[:c]" -> numbers
local function unpack_numbers(raw)
  local out = {}
  for part in string.gmatch(raw, '[^:]+') do
    out[#out + 1] = tonumber(part)
  end
  return out
end

local function clock(arg)
  if arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Store a packed string state that stays meaningful until `expires_at` (ms, the script's clock).
local function save_string(step, value, expires_at, now, slack)
  if expires_at <= now then
    redis.call('DEL', step.key)
  else
    redis.call('SET', step.key, value, 'PX', int(expires_at - now + slack))
  end
end

-- `count` steps whose arguments start at ARGV[first_arg] and whose keys start at KEYS[first_key].
local function read_steps(first_arg, first_key, count)
  local steps = {}
  for i = 1, count do
    local a = first_arg + (i - 1) * 6
    local k = first_key + (i - 1) * 2
    steps[i] = {
      key = KEYS[k],
      blockKey = KEYS[k + 1],
      algorithm = ALGORITHMS[ARGV[a]],
      limit = tonumber(ARGV[a + 1]),
      window = tonumber(ARGV[a + 2]),
      capacity = tonumber(ARGV[a + 3]),
      cost = tonumber(ARGV[a + 4]),
      lease = ARGV[a + 5],
    }
    if steps[i].algorithm == nil then
      return redis.error_reply('ERR sluice: unknown algorithm ' .. tostring(ARGV[a]))
    end
  end
  return steps
end

-- A step's block and state, as the memory store sees its entry: a state that is no longer meaningful
-- reads as nil and is dropped, together with a past block, unless a block still holds the entry.
-- Returns blocked_until (ms, 0 when none) and the state.
local function load(step, now)
  local blocked_until = tonumber(redis.call('GET', step.blockKey) or '0')
  if blocked_until > now then
    return blocked_until, step.algorithm.read(step, now, true)
  end
  local state = step.algorithm.read(step, now, false)
  if state == nil and blocked_until > 0 then
    redis.call('DEL', step.blockKey)
    blocked_until = 0
  end
  return blocked_until, state
end
