-- Built by scripts/build-lua.mjs from packages/sluice/src/stores/redis/scripts/hybrid/add.lua: do not edit.
-- Sluice hybrid mode (src/stores/redis/hybrid.ts): add a process's local count to the global one.
-- KEYS: the counter of one (policy, subject, window): `prefix:{subject}:policy:h:window`.
-- ARGV: units to add (0 only reads; negative after refunds), time to live in ms (two windows).
-- Reply: the global count after the addition (integer).
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return n
