-- Sluice block: deny every request for these keys until now + durationMs, whatever their units.
-- A longer block already in place is kept.
-- KEYS: per step, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), slack (extra TTL ms), durationMs,
--       then per step: algorithm, limit, windowMs, capacity, cost, leaseId.
-- Reply: the blocked-until time (ms, the script's clock) of the last step.

--- @include "common"
--- @include "fixed-window"
--- @include "sliding-window-log"
--- @include "sliding-window-counter"
--- @include "token-bucket"
--- @include "gcra"
--- @include "concurrency"

local now = clock(ARGV[1])
local slack = tonumber(ARGV[2])
local duration = tonumber(ARGV[3])
local steps = read_steps(4, 1, #KEYS / 2)
if steps.err then
  return steps
end

local until_ms = now + duration
for _, step in ipairs(steps) do
  -- Loading drops a state (and a past block) that is no longer meaningful, as the memory store does.
  local current = load(step, now)
  local target = math.max(current, until_ms)
  redis.call('SET', step.blockKey, int(target), 'PX', int(target - now + slack))
end
return until_ms
