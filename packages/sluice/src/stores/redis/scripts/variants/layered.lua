-- Sluice apply, layered: 1..N decisions of 1..M steps of any algorithms in one call, each decision
-- all or nothing: a consume commits its steps only if every one admits. Phase one reads and decides
-- every step of a decision and keeps what phase two needs of it in `keep`; phase two commits every
-- step or none, and replies. Every key is in one hash slot.
-- KEYS: per decision, per step, the state key then the block key.
-- ARGV: now (ms, or "" for the Redis clock), then per decision: its step count, then per step the
--       algorithm's name and its arguments as in apply.lua (the costs signed by the decision's mode).
-- Reply: per step of every decision, in order, the 3 integers of apply.lua.

--- @include "shared/call"
local reply = {}
-- Per step of the decision: its algorithm's name, then the locals phase two reads (`keep`, `restore`).
local keep = {}
local a, k, n = 2, 1, #ARGV
while a <= n do
  local steps = ARGV[a] + 0
  a = a + 1
  local all, peek = true, false
  for s = 1, steps do
    local algorithm = ARGV[a]
    a = a + 1
    --- @include "shared/seen"
    --- @include "shared/step"
    --- @include "shared/blocked"
    --- @each-algorithm
    --- @include "args"
    if cost < 0 then
      peek, cost = true, -1 - cost
    end
    --- @include "read"
    --- @include "shared/drop"
    --- @include "decide"
    -- All or nothing: the decision commits only if no step is denied or blocked.
    all = all and allowed and not blocked
    --- @include "keep"
    --- @end
    k = k + 2
  end
  for s = 1, steps do
    local saved = keep[s]
    local algorithm = saved[1]
    --- @each-algorithm
    --- @include "restore"
    -- Nothing is committed unless every step admits: steps that would admit report their state as it is.
    if all and not peek then
      --- @include "commit"
    end
    --- @include "report"
    --- @include "shared/reply"
    --- @end
  end
end
return reply
