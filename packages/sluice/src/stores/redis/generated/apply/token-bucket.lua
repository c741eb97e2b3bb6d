-- Built by scripts/build-lua.mjs from packages/sluice/src/stores/redis/scripts/: do not edit.
-- variants/apply.lua with token-bucket.lua: one step's arguments are limit, window, capacity, cost.
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

-- Every script's setup, once per call: the clock, the call's keys read ahead, and the policy
-- numbers each algorithm's `args` fills.
--
-- The clock: ARGV[1] is now in ms, or "" for the Redis clock ("v": the Redis clock, writing the
-- value layouts only: the store's `compactValues: false`). In client clock mode keys live
-- CLIENT_CLOCK_SLACK_MS longer than they are meaningful (`slack`), to absorb host clock skew.
-- Cheap forms, measured with callgrind (bench/lua-cost.ts): a numeric string is converted with
-- `s + 0`, not tonumber(s), which in Redis's Lua 5.1 runs strtod twice; whole numbers are written
-- with '%d' (a long: exact up to 2^53), not '%.0f', whose float printing costs about 2k instructions
-- per number (so does passing a number to redis.call: Redis 7.0 prints it with '%.17g'); a state is
-- written with PSETEX key ms value (what SET key value PX ms does, one argument fewer); the larger
-- or smaller of two numbers is a comparison, not math.max or math.min, whose call costs about 300
-- instructions (a token bucket's decision made three: 2.3% of its instructions at 32 per call, keys
-- read back).
-- Compact states (`compact`): on the Redis clock, an algorithm may keep a state's time as the key's
-- own expiry (SET ... PXAT, read back with PEXPIRETIME, Redis 7.0 and later) and only a small
-- integer as its value, which Redis stores in the key object (int encoding; below 10,000 a shared
-- object). With a client clock the expiry runs on another clock than the state: values carry times.
-- The library functions the steps use, as locals: `math.floor(x)` reads the global `math` and
-- then its field on every use, a local is one register (about 4% fewer instructions per decision
-- at 16 per call, by bench/lua-cost.ts). KEYS and ARGV too: globals, read per step.
local KEYS, ARGV = KEYS, ARGV
local call = redis.call
local ceil, floor = math.ceil, math.floor
local format, find, sub, byte = string.format, string.find, string.sub, string.byte
local CLIENT_CLOCK_SLACK_MS = 1000
local now, slack, compact
if ARGV[1] == '' or ARGV[1] == 'v' then
  local t = call('TIME')
  now, slack = t[1] * 1000 + floor(t[2] / 1000), 0
  compact = ARGV[1] == '' and (redis.REDIS_VERSION_NUM or 0) >= 0x070000
else
  now, slack, compact = ARGV[1] + 0, CLIENT_CLOCK_SLACK_MS, false
end
-- A call of more than one step reads all its keys with one MGET: one command instead of two per
-- step (8-10% fewer instructions per decision at 16 per call, by bench/lua-cost.ts). One step alone
-- reads its keys itself: an MGET and its table cost more than they save there. MGET answers nil
-- for a key that holds no string (a sliding log's list), and that algorithm reads its own. A value
-- read here holds until the call writes its key: a step that names a key a step before it named
-- (`again`) reads the key itself (`fresh` in shared/step.lua). Each variant sets `again` before its
-- steps: apply from the client's runs, the others from the keys named so far (shared/seen.lua,
-- which keeps them in `seen`).
local pre, seen, again
if #KEYS > 2 then
  pre = call('MGET', unpack(KEYS))
end
-- The policy numbers of the step being decided, and the ARGV strings they were read from: each
-- algorithm's `args` reads them again only when they change (a call's steps usually share a policy).
local limit_arg, window_arg, period_arg, following_arg, capacity_arg
local limit, window, period, following, capacity
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
  -- One step's arguments: limit, window, capacity, cost.
  if ARGV[a] ~= limit_arg or ARGV[a + 1] ~= window_arg or ARGV[a + 2] ~= capacity_arg then
    limit_arg, window_arg, capacity_arg = ARGV[a], ARGV[a + 1], ARGV[a + 2]
    limit, window, capacity = limit_arg + 0, window_arg + 0, capacity_arg + 0
  end
  local cost = ARGV[a + 3] + 0
  a = a + 4
  local peek = cost < 0
  if peek then
    cost = -1 - cost
  end
  for _ = 1, run do
    -- The step's keys (KEYS[k] and KEYS[k + 1]), and whether the call's MGET holds their values: only
    -- the first time the call names the key (`fresh`, not `again`), since a step decided before may
    -- have written it.
    local key, block_key = KEYS[k], KEYS[k + 1]
    local fresh = pre ~= nil and not again
    -- The block rule, read: the step's block ends at blocked_until (ms, 0 when none); `blocked` is true
    -- while it is in force. A block in force denies the step whatever its units say (shared/reply.lua
    -- adds its wait) and keeps a dead state's key (shared/drop.lua).
    local blocked_until
    if fresh then
      blocked_until = pre[k + 1]
    else
      blocked_until = call('GET', block_key)
    end
    blocked_until = blocked_until and blocked_until + 0 or 0
    local blocked = blocked_until > now
    local full = capacity * window
    local level, at
    -- The step's state, for an algorithm that keeps it as a string: `raw` (false when there is none),
    -- from the call's MGET while the key is fresh (shared/step.lua), else from Redis.
    local raw
    if fresh then
      raw = pre[k]
    else
      raw = call('GET', key)
    end
    if raw then
      local c1 = find(raw, ':', 1, true)
      if c1 then
        local c2 = find(raw, ':', c1 + 1, true)
        if c2 then
          level, at = sub(raw, 1, c1 - 1) + 0, sub(raw, c1 + 1, c2 - 1) + 0
          local lowest = full - (sub(raw, c2 + 1) + 0) * limit
          if lowest > level then
            level = lowest
          end
        else
          level, at = sub(raw, 1, c1 - 1) + 0, sub(raw, c1 + 1) + 0
        end
      elseif #raw < 19 or byte(raw, 1) == 45 then
        level = raw + 0
        if level >= 0 then
          level = level * window
        else
          level = -1 - level
        end
        at = call('PEXPIRETIME', key) - ceil((full - level) / limit)
      else
        -- The one-integer layout: its field widths follow the digits of full.
        local d = #format('%d', full)
        local kd = 18 - d
        if #raw == 1 + d + kd and kd >= 1 then
          level = sub(raw, 2, 1 + d) + 0
          local r = sub(raw, 2 + d) + 0
          local m = 10 ^ kd
          at = r + m * floor((now - r) / m + 0.5)
          if at > now then
            level = nil
          end
        end
      end
      if level ~= nil and (level >= full or at + ceil((full - level) / limit) <= now) then
        level = nil
      end
    end
    local stored, live = raw ~= false, level ~= nil
    -- Right after the algorithm's read, which sets `stored` (a state was read) and `live` (it is still
    -- meaningful): as the memory store sees its entry, a state that is no longer meaningful is deleted
    -- unless a block in force keeps its key, and with no live state a past block is deleted too.
    if not blocked then
      if stored and not live then
        call('DEL', key)
      end
      if not live and blocked_until > 0 then
        call('DEL', block_key)
      end
    end
    -- Refill; a clock that stepped backwards refills nothing and keeps the newest time seen.
    local cur, cur_at = full, now
    if level ~= nil then
      if at > now then
        cur_at = at
      end
      cur = level + (cur_at - at) * limit
      if cur > full then
        cur = full
      end
    end
    local need = cost * window
    local lag = cur_at - now
    local allowed = cur >= need
    local retry = 0
    if not allowed then
      retry = lag + ceil((need - cur) / limit)
    end
    local after = cur
    if allowed and not peek and not blocked then
      after = cur - need
      -- Write `after` tokens x window at cur_at, live until the bucket is full again.
      if after >= full then
        call('DEL', key)
      else
        local span = ceil((full - after) / limit)
        if cur_at + span <= now then
          call('DEL', key)
        elseif compact and cur_at == now and after >= 0 and after < 100000000000000000 then
          local tokens = floor(after / window)
          local value, rest = -1 - after, after - tokens * window
          -- rest < 0: a quotient rounded up, at levels near 2^53.
          if rest >= 0 and rest % limit == 0 and tokens < 1000000000000 then
            value = tokens
          end
          call('SET', key, format('%d', value), 'PXAT', format('%d', now + span))
        else
          local value = format('%d:%d:%d', after, cur_at, span)
          call('PSETEX', key, format('%d', cur_at + span - now + slack), value)
        end
      end
    end
    local reset = 0
    if after < full then
      reset = lag + ceil((full - after) / limit)
    end
    -- A forced charge (variants/charge.lua) can leave the level below zero: nothing is left then.
    local remaining = floor(after / window)
    if remaining < 0 then
      remaining = 0
    end
    -- The block rule, answered: appends the step's 3 reply integers from `allowed`, `remaining`, `reset`
    -- and `retry` (what the units say, after the commit). A block in force denies and adds its wait; it
    -- never shortens the one the units impose.
    local r = #reply
    if blocked then
      local left = blocked_until - now
      reply[r + 1] = -1
      reply[r + 2] = left > reset and left or reset
      reply[r + 3] = -1 - (left > retry and left or retry)
    else
      reply[r + 1] = allowed and remaining or -1 - remaining
      reply[r + 2] = reset
      reply[r + 3] = retry
    end
    k = k + 2
  end
end
return reply
