-- Sluice block: deny every request for these keys until now + durationMs, whatever their units. A
-- longer block already in place is kept. Reading each state first drops one that is no longer
-- meaningful (and a past block), as the memory store does.
-- KEYS: per step, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), durationMs, then per step the algorithm's name and its
--       arguments as in apply.lua.
-- Reply: the blocked-until time (ms, the script's clock).

--- @include "shared/call"
local until_ms = now + ARGV[2]
local a, k, n = 3, 1, #ARGV
while a <= n do
  local algorithm = ARGV[a]
  a = a + 1
  --- @include "shared/seen"
  --- @include "shared/step"
  --- @include "shared/blocked"
  --- @each-algorithm
  --- @include "args"
  --- @include "read"
  --- @include "shared/drop"
  --- @end
  local target = until_ms
  if blocked and blocked_until > target then
    target = blocked_until
  end
  call('PSETEX', block_key, format('%d', target - now + slack), format('%d', target))
  k = k + 2
end
return until_ms
