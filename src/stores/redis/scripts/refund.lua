-- Sluice refund: give back `cost` units of each step (concurrency: release lease `leaseId`).
-- KEYS: per step, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), slack (extra TTL ms),
--       then per step: algorithm, limit, windowMs, capacity, cost, leaseId.
-- Reply: the number of steps that had state to refund.

--- @include "common"
--- @include "fixed-window"
--- @include "sliding-window-log"
--- @include "sliding-window-counter"
--- @include "token-bucket"
--- @include "gcra"
--- @include "concurrency"

local now = clock(ARGV[1])
local slack = tonumber(ARGV[2])
local steps = read_steps(3, 1, #KEYS / 2)
if steps.err then
  return steps
end

local refunded = 0
for _, step in ipairs(steps) do
  local _, state = load(step, now)
  if state ~= nil then
    step.algorithm.refund(step, state, now, step.cost, slack)
    refunded = refunded + 1
  end
end
return refunded
