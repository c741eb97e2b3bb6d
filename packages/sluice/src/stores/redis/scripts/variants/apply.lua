-- Sluice apply: 1..N independent one-step decisions of one algorithm in one call, evaluated in
-- order. One decision is the plain single-policy call; several are the store's coalescing. One
-- script serves both: two scripts for one key could be reordered by NOSCRIPT recovery (the retry of
-- the one not yet loaded runs after the other).
-- KEYS: per decision, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), then per decision the algorithm's arguments (its
--       `@args`); the cost is signed by mode (consume: cost; peek: -1 - cost, so a peek of cost 0
--       is -1).
-- Reply: per decision 3 integers: allowed ? remaining : -1 - remaining, resetMs,
--        blocked ? -1 - retryAfterMs : retryAfterMs (blocked implies not allowed).

--- @include "shared/call"
local reply = {}
local a, k, n = 2, 1, #ARGV
while a <= n do
  --- @include "args"
  local peek = cost < 0
  if peek then
    cost = -1 - cost
  end
  --- @include "shared/step"
  --- @include "shared/blocked"
  --- @include "read"
  --- @include "shared/drop"
  --- @include "decide"
  if allowed and not peek and not blocked then
    --- @include "commit"
  end
  --- @include "report"
  --- @include "shared/reply"
  k = k + 2
end
return reply
