-- Sluice charge: commit `cost` units of each step whether it admits or not, even past the limit
-- (settle's forced charge: the work is done, later requests pay): each algorithm's decide, its
-- verdict ignored, then its commit. A block in force is left as it is.
-- KEYS: per step, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), then per step the algorithm's name and its arguments
--       as in apply.lua (the cost unsigned).
-- Reply: the number of steps charged.

--- @include "shared/call"
local charged = 0
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
  --- @include "decide"
  --- @include "commit"
  charged = charged + 1
  --- @end
  k = k + 2
end
return charged
