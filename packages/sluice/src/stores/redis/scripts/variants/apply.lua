-- Sluice apply: 1..N independent one-step decisions of one algorithm in one call, evaluated in
-- order. One decision is the plain single-policy call; several are the store's coalescing. One
-- script serves both: two scripts for one key could be reordered by NOSCRIPT recovery (the retry of
-- the one not yet loaded runs after the other).
-- KEYS: per decision, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), then runs: a run is a count of decisions, then the
--       arguments those decisions share (the algorithm's `@args`); the cost is signed by mode
--       (consume: cost; peek: -1 - cost, so a peek of cost 0 is -1). Coalesced decisions of one
--       policy, cost and mode are one run, so their arguments are sent, parsed and read once. A
--       negative count -n: n decisions that each name a key a decision before it in the call named
--       (it reads its values itself: the MGET's may be stale); a positive count: none of them does.
-- Reply: per decision 3 integers: allowed ? remaining : -1 - remaining, resetMs,
--        blocked ? -1 - retryAfterMs : retryAfterMs (blocked implies not allowed).

--- @include "shared/call"
local reply = {}
local a, k, n = 2, 1, #ARGV
while a <= n do
  local run = ARGV[a] + 0
  a = a + 1
  -- The runs say which steps name a key again: no table of the keys named so far, which cost 2.2%
  -- of a token bucket's instructions per decision at 32 per call, keys read back (callgrind).
  again = run < 0
  if again then
    run = -run
  end
  --- @include "args"
  local peek = cost < 0
  if peek then
    cost = -1 - cost
  end
  for _ = 1, run do
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
end
return reply
