-- Sluice records (src/stores/redis/records.ts): remove one record.
-- KEYS: the set's hash `prefix:{#records}:kind:policy`, the version `prefix:{#records}:version`.
-- ARGV: subject, the new version (written only when a record was removed).
-- Reply: 1 removed, 0 there was none.
local removed = redis.call('HDEL', KEYS[1], ARGV[1])
if removed == 1 then
  redis.call('SET', KEYS[2], ARGV[2])
end
return removed
