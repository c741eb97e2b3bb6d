-- Prelude of the flat single-step scripts (one-*.lua): plain statements, no function definitions, so
-- a call pays only for its decisions. Each call carries 1..N independent one-step decisions of one
-- algorithm (the store's coalescing), evaluated in order. The layout is kept small: each argument
-- costs Redis about 1.5k instructions per call and each reply integer about 2k.
-- KEYS: per decision, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), then per decision `STRIDE` values: limit, windowMs,
--       capacity (only where CAPACITY: token bucket, GCRA), signed cost (consume: cost; peek:
--       -1 - cost, so a peek of cost 0 is -1), and for concurrency the lease id.
-- Reply: per decision 3 integers: allowed ? remaining : -1 - remaining, resetMs,
--        blocked ? -1 - retryAfterMs : retryAfterMs (blocked implies not allowed).
-- The including script sets `local STRIDE, CAPACITY = ...` before the include. The prelude opens the
-- loop over decisions and sets, for each: a (the decision's first ARGV index), peek, limit, window,
-- capacity (where CAPACITY), policy_new (true when they differ from the previous decision's), cost,
-- key, block_key, blocked_until, held, and once per call `slack`. The including script reads its
-- state, includes one-drop.lua, decides, then includes one-reply.lua, which appends the 3 reply
-- integers and closes the loop.

-- Cheap forms, measured with callgrind (bench/lua-cost.ts): a numeric string is converted with
-- `s + 0`, not tonumber(s), which in Redis's Lua 5.1 runs strtod twice; whole numbers are written
-- with '%d' (a long: exact up to 2^53, the same text as '%.0f'), not '%.0f', whose float printing
-- costs about 2k instructions per number (so does passing a number to redis.call: Redis 7.0 prints
-- it with '%.17g'); and a state is written with PSETEX key ms value (what SET key value PX ms does,
-- one argument fewer).

-- Extra TTL (ms) in client clock mode, where host clocks may lag the Redis clock. Twin of
-- CLIENT_CLOCK_SLACK_MS in src/stores/redis/index.ts, which passes it to the module scripts.
local CLIENT_CLOCK_SLACK_MS = 1000
local now, slack
if ARGV[1] ~= '' then
  now, slack = ARGV[1] + 0, CLIENT_CLOCK_SLACK_MS
else
  local t = redis.call('TIME')
  now, slack = t[1] * 1000 + math.floor(t[2] / 1000), 0
end
local reply = {}
local a, k, n = 2, 1, #ARGV
-- The cost's place in a decision: after limit, windowMs and, where taken, capacity.
local cost_at = CAPACITY and 3 or 2
-- A call's decisions usually share one policy: its numbers are parsed again only when they change,
-- and `policy_new` tells the including script to recompute what it derives from them.
local limit_arg, window_arg, capacity_arg, limit, window, capacity
while a <= n do
  local policy_new = false
  if ARGV[a] ~= limit_arg or ARGV[a + 1] ~= window_arg or (CAPACITY and ARGV[a + 2] ~= capacity_arg) then
    limit_arg, window_arg = ARGV[a], ARGV[a + 1]
    limit, window = limit_arg + 0, window_arg + 0
    if CAPACITY then
      capacity_arg = ARGV[a + 2]
      capacity = capacity_arg + 0
    end
    policy_new = true
  end
  local cost = ARGV[a + cost_at] + 0
  local peek = cost < 0
  if peek then
    cost = -1 - cost
  end
  local key, block_key = KEYS[k], KEYS[k + 1]
  -- A block in force keeps a dead state's key (one-drop.lua deletes what is no longer meaningful).
  local blocked_until = redis.call('GET', block_key)
  blocked_until = blocked_until and blocked_until + 0 or 0
  local held = blocked_until > now
