-- Sluice block: deny every request for these keys until now + durationMs, whatever their units. A
-- longer block already in place is kept. Reading each state first drops one that is no longer
-- meaningful (and a past block), as the memory store does (scripts/*.lua in scripts/variants/block.lua).
-- KEYS: per step, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), durationMs, then per step the algorithm's name and its
--       arguments as in apply.lua.
-- Reply: the blocked-until time (ms, the script's clock).

--- @include "clock"
--- @const
local until_ms = now + ARGV[2]
local a, k, n = 3, 1, #ARGV
while a <= n do
  local algorithm = ARGV[a]
  a = a + 1
  local key, block_key = KEYS[k], KEYS[k + 1]
  k = k + 2
  --- @include "held"
  --- @dispatch
  --- @args
  --- @policy-locals
  --- @fragment policy
  --- @fragment read
  --- @include "drop"
  --- @next
  --- @end
  local target = until_ms
  if held and blocked_until > target then
    target = blocked_until
  end
  redis.call('PSETEX', block_key, string.format('%d', target - now + slack), string.format('%d', target))
end
return until_ms
