-- Sluice records (src/stores/redis/records.ts): read one record, or every record of a set.
-- KEYS: the set's hash `prefix:{#records}:kind:policy`.
-- ARGV: the subject, or nothing for every record of the set.
-- Reply: with a subject, its stored value (`expiresAt:value`) or nil; without, subject1, stored
-- value1, subject2, ...
if #ARGV == 1 then
  return redis.call('HGET', KEYS[1], ARGV[1])
end
return redis.call('HGETALL', KEYS[1])
