-- Sluice batch: several independent decisions in one script call (the store's coalescing), evaluated
-- in order, each one all or nothing as in apply. Every key is in one hash slot.
-- KEYS: per decision, per step, the state key then the block key.
-- ARGV: now (ms, or "" for the Redis clock), slack (extra TTL ms), then per decision:
--       mode ("consume" | "peek"), step count, then per step: algorithm, limit, windowMs, capacity,
--       cost, leaseId.
-- Reply: per step of every decision, in order, the 5 integers of apply.

--- @include "common"
--- @include "fixed-window"
--- @include "sliding-window-log"
--- @include "sliding-window-counter"
--- @include "token-bucket"
--- @include "gcra"
--- @include "concurrency"
--- @include "decide"

local now = clock(ARGV[1])
local slack = tonumber(ARGV[2])
local reply = {}
local a, k = 3, 1
while a <= #ARGV do
  local peek = ARGV[a] == 'peek'
  local count = tonumber(ARGV[a + 1])
  local steps = read_steps(a + 2, k, count)
  if steps.err then
    return steps
  end
  decide(steps, now, peek, slack, reply)
  a = a + 2 + count * 6
  k = k + count * 2
end
return reply
