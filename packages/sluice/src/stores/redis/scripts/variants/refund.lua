-- Sluice refund: give back `cost` units of each step (concurrency: release lease `lease`, or without
-- one `cost` units of the leases taken without one) (scripts/*.lua in scripts/variants/refund.lua).
-- KEYS: per step, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), then per step the algorithm's name and its arguments
--       as in apply.lua (the cost unsigned).
-- Reply: the number of steps that had state to refund.

--- @include "clock"
--- @const
local refunded = 0
local a, k, n = 2, 1, #ARGV
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
  if live then
    --- @fragment refund
    refunded = refunded + 1
  end
  --- @next
  --- @end
end
return refunded
