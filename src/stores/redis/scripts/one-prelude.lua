-- Prelude of the flat single-step scripts (one-*.lua): plain statements, no function definitions, so
-- a call pays only for its decisions. Each call carries 1..N independent one-step decisions of one
-- algorithm (the store's coalescing), evaluated in order.
-- KEYS: per decision, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), slack (extra TTL ms), then per decision `STRIDE` values:
--       mode ("consume" | "peek"), limit, windowMs, capacity, cost, and for concurrency the lease id.
-- Reply: per decision 5 integers: allowed (0/1), remaining, resetMs, retryAfterMs, blocked (0/1).
-- The including script sets `local STRIDE = 5` (6 for concurrency) before the include. The prelude
-- opens the loop over decisions and sets, for each: a (the decision's first ARGV index), peek,
-- limit, window, capacity, policy_new (true when they differ from the previous decision's), cost,
-- key, block_key, blocked_until, held. The including script reads its state, includes one-drop.lua,
-- decides, then includes one-reply.lua, which appends the 5 reply integers and closes the loop.

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local slack = tonumber(ARGV[2])
local reply = {}
local a, k, n = 3, 1, #ARGV
-- A call's decisions usually share one policy: its numbers are parsed again only when they change,
-- and `policy_new` tells the including script to recompute what it derives from them.
local limit_arg, window_arg, capacity_arg, limit, window, capacity
while a <= n do
  local peek = ARGV[a] == 'peek'
  local policy_new = false
  if ARGV[a + 1] ~= limit_arg or ARGV[a + 2] ~= window_arg or ARGV[a + 3] ~= capacity_arg then
    limit_arg, window_arg, capacity_arg = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
    limit, window, capacity = tonumber(limit_arg), tonumber(window_arg), tonumber(capacity_arg)
    policy_new = true
  end
  local cost = tonumber(ARGV[a + 4])
  local key, block_key = KEYS[k], KEYS[k + 1]
  -- A block in force keeps a dead state's key (one-drop.lua deletes what is no longer meaningful).
  local blocked_until = tonumber(redis.call('GET', block_key) or '0')
  local held = blocked_until > now
