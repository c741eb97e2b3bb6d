-- Sluice apply, layered: 1..N decisions of 1..M steps of any algorithms in one call, each decision
-- all or nothing: a consume commits its steps only if every one admits (scripts/*.lua in
-- scripts/variants/layered.lua). Phase one reads and decides every step of a decision and keeps its
-- locals in `keep`; phase two commits (or not) and replies. Every key is in one hash slot.
-- KEYS: per decision, per step, the state key then the block key.
-- ARGV: now (ms, or "" for the Redis clock), then per decision: its step count, then per step the
--       algorithm's name and its arguments as in apply.lua (the costs signed by the decision's mode).
-- Reply: per step of every decision, in order, the 3 integers of apply.lua.

--- @include "clock"
--- @const
local reply = {}
-- Each step's algorithm and carried locals, in order (a table constructor of nils sizes it once).
--- @keep-table
local a, k, n = 2, 1, #ARGV
while a <= n do
  local steps = ARGV[a] + 0
  a = a + 1
  local all, peek, o = true, false, 0
  for _ = 1, steps do
    local algorithm = ARGV[a]
    a = a + 1
    keep[o + 1] = algorithm
    o = o + 1
    local key, block_key = KEYS[k], KEYS[k + 1]
    k = k + 2
    --- @include "held"
    --- @dispatch
    --- @args
    if cost < 0 then
      peek, cost = true, -1 - cost
    end
    --- @policy-locals
    --- @fragment policy
    --- @fragment read
    --- @include "drop"
    --- @fragment decide
    all = all and allowed and not held
    --- @carry-save
    --- @next
    --- @end
  end
  o = 0
  for _ = 1, steps do
    local algorithm = keep[o + 1]
    o = o + 1
    --- @dispatch
    --- @carry-load
    -- Nothing is charged unless every step admits: steps that would admit report their state as it is.
    if all and not peek then
      --- @fragment commit
    end
    --- @fragment report
    --- @include "reply"
    --- @end
  end
end
return reply
