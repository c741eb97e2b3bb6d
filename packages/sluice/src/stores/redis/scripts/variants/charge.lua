-- Sluice charge: commit `cost` units of each step without the admit check, even past the limit
-- (settle's forced charge: the work is done, later requests pay). A block in force is left as it is
-- (scripts/*.lua in scripts/variants/charge.lua: each algorithm's decide, its verdict ignored, then
-- its commit).
-- KEYS: per step, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), then per step the algorithm's name and its arguments
--       as in apply.lua (the cost unsigned).
-- Reply: the number of steps charged.

--- @include "clock"
--- @const
local charged = 0
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
  --- @fragment decide
  --- @fragment commit
  charged = charged + 1
  --- @next
  --- @end
end
return charged
