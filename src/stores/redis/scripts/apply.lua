-- Sluice apply: evaluate 1..N steps of any algorithms; with mode "consume", commit all of them only
-- if every step admits (all or nothing). One atomic call per hash slot.
-- KEYS: per step, the state key then the block key (all in one hash slot).
-- ARGV: mode ("consume" | "peek"), now (ms, or "" for the Redis clock), slack (extra TTL ms),
--       then per step: algorithm, limit, windowMs, capacity, cost, leaseId.
-- Reply: per step 5 integers: allowed (0/1), remaining, resetMs, retryAfterMs, blocked (0/1).

--- @include "common"
--- @include "fixed-window"
--- @include "sliding-window-log"
--- @include "sliding-window-counter"
--- @include "token-bucket"
--- @include "gcra"
--- @include "concurrency"
--- @include "decide"

local peek = ARGV[1] == 'peek'
local now = clock(ARGV[2])
local slack = tonumber(ARGV[3])
local steps = read_steps(4, 1, #KEYS / 2)
if steps.err then
  return steps
end
local reply = {}
decide(steps, now, peek, slack, reply)
return reply
