// Reference Lua scripts the Redis benchmarks compare Sluice's scripts with.

/** rate-limiter-flexible's RateLimiterRedis script (a fixed-window counter), for reference. */
export const RLF_SCRIPT = `redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX')
local consumed = redis.call('incrby', KEYS[1], ARGV[1])
local ttl = redis.call('pttl', KEYS[1])
if ttl == -1 then
  redis.call('expire', KEYS[1], ARGV[2])
  ttl = 1000 * ARGV[2]
end
return {consumed, ttl}
`

/** The "bare EVALSHA" reference: a minimal token bucket (TIME, GET, SET of "level:at"). */
export const MINIMAL_TOKEN_BUCKET = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit, window, full = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]) * tonumber(ARGV[2])
local level = full
local raw = redis.call('GET', KEYS[1])
if raw then
  local c = string.find(raw, ':', 1, true)
  local at = tonumber(string.sub(raw, c + 1))
  level = math.min(full, tonumber(string.sub(raw, 1, c - 1)) + (now - at) * limit)
end
local ok = level >= window
if ok then
  level = level - window
end
redis.call('SET', KEYS[1], string.format('%.0f', level) .. ':' .. now, 'PX', 3600000)
return { ok and 1 or 0, math.floor(level / window) }
`
