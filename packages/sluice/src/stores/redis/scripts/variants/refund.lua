-- Sluice refund: give back `cost` units of each step (concurrency: release lease `lease`, or without
-- one `cost` units of the leases taken without one).
-- KEYS: per step, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), then per step the algorithm's name and its arguments
--       as in apply.lua (the cost unsigned).
-- Reply: the number of steps that had state to refund.

--- @include "shared/call"
local refunded = 0
local a, k, n = 2, 1, #ARGV
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
  if live then
    --- @include "refund"
    refunded = refunded + 1
  end
  --- @end
  k = k + 2
end
return refunded
