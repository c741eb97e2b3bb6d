-- Sluice records (src/stores/redis/records.ts): write one record, within the bound of its set.
-- KEYS: the set's hash `prefix:{#records}:kind:policy`, the version `prefix:{#records}:version`.
-- ARGV: subject, the stored value (`expiresAt:value`, expiresAt 0 for never), now (ms), the most
-- live records the set may hold, the new version.
-- Reply: 1 written, 0 refused (the set is full and the subject is not in it).
local now = tonumber(ARGV[3])
local most = tonumber(ARGV[4])
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('HLEN', KEYS[1]) >= most then
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    local at = tonumber(string.match(all[i + 1], '^(%d+):'))
    if at ~= nil and at > 0 and at <= now then
      redis.call('HDEL', KEYS[1], all[i])
    end
  end
  if redis.call('HLEN', KEYS[1]) >= most then
    return 0
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[5])
return 1
