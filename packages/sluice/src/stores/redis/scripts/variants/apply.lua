-- Sluice apply: 1..N independent one-step decisions of {{algorithm}} in one call, evaluated in order
-- (scripts/{{algorithm}}.lua in scripts/variants/apply.lua). One decision is the plain single-policy
-- call; several are the store's coalescing. One script serves both: two scripts for one key could be
-- reordered by NOSCRIPT recovery (the retry of the one not yet loaded runs after the other).
-- KEYS: per decision, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), then per decision {{args}}; the cost is signed by
--       mode (consume: cost; peek: -1 - cost, so a peek of cost 0 is -1).
-- Reply: per decision 3 integers: allowed ? remaining : -1 - remaining, resetMs,
--        blocked ? -1 - retryAfterMs : retryAfterMs (blocked implies not allowed).

--- @include "clock"
--- @const
--- @args-cache-locals
local reply = {}
local a, k, n = 2, 1, #ARGV
--- @prefetch-call
while a <= n do
  -- A call's decisions usually share one policy: its numbers are parsed again only when they
  -- change, and so is what the policy fragment derives from them.
  --- @args-cached
  local peek = cost < 0
  if peek then
    cost = -1 - cost
  end
  local key, block_key = KEYS[k], KEYS[k + 1]
  --- @prefetch-step
  --- @include "held"
  --- @fragment read
  --- @include "drop"
  --- @fragment decide
  if allowed and not peek and not held then
    --- @fragment commit
  end
  --- @fragment report
  --- @include "reply"
  --- @next
  k = k + 2
end
return reply
