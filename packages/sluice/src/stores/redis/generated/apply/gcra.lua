-- Built by scripts/build-lua.mjs from packages/sluice/src/stores/redis/scripts/: do not edit.
-- variants/apply.lua with gcra.lua: one step's arguments are limit, window, capacity, cost.
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
    local tat_ms, tat_rem, lead
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
        tat_ms = sub(raw, 1, c1 - 1) + 0
        if c2 then
          tat_rem, lead = sub(raw, c1 + 1, c2 - 1) + 0, sub(raw, c2 + 1) + 0
        else
          tat_rem, lead = sub(raw, c1 + 1) + 0, 0
        end
      elseif #raw <= 12 and byte(raw, 1) ~= 45 then
        tat_ms, tat_rem, lead = call('PEXPIRETIME', key), 0, raw + 0
      elseif #raw > 14 and byte(raw, 1) == 45 then
        tat_ms, tat_rem, lead = sub(raw, -13) + 0, 0, sub(raw, 2, -14) + 0
      else
        tat_ms, tat_rem, lead = raw + 0, 0, 0
      end
      if tat_rem >= limit then
        tat_rem = limit - 1
      end
      if lead > 0 and lead * limit + tat_rem > capacity * window then
        local whole = floor(capacity * window / limit)
        tat_ms, tat_rem = tat_ms - lead + whole, capacity * window - whole * limit
      end
      local live_until = tat_ms
      if tat_rem > 0 then
        live_until = tat_ms + 1
      end
      if live_until <= now then
        tat_ms = nil
      end
    end
    local stored, live = raw ~= false, tat_ms ~= nil
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
    -- The later of the stored TAT and now; debt = how far it is ahead of now, in 1/limit ms.
    if tat_ms == nil or tat_ms < now then
      tat_ms, tat_rem = now, 0
    end
    local full = capacity * window
    local before = (tat_ms - now) * limit + tat_rem
    local cost_debt = cost * window
    local allowed = before + cost_debt <= full
    local retry = 0
    if not allowed then
      retry = ceil((before + cost_debt - full) / limit)
    end
    local after = before
    if allowed and not peek and not blocked then
      after = before + cost_debt
      local delta = cost_debt
      -- Move the TAT by `delta` (1/limit ms) and write it, or delete it when it is not ahead of now. Its
      -- lead: how far it is ahead of now, at most the part within one full refill.
      local total = tat_rem + delta
      local whole = floor(total / limit)
      local ms, rem = tat_ms + whole, total - whole * limit
      local lead_ms = ms - now
      if lead_ms * limit + rem > full then
        lead_ms = floor((full - rem) / limit)
      end
      if lead_ms < 0 then
        lead_ms = 0
      end
      local value, live_until
      if rem ~= 0 then
        value, live_until = format('%d:%d:%d', ms, rem, lead_ms), ms + 1
      elseif compact and lead_ms < 1000000000000 then
        value, live_until = nil, ms
      elseif ms < 1000000000000 or ms >= 10000000000000 or lead_ms >= 922336 then
        value, live_until = format('%d:0:%d', ms, lead_ms), ms
      elseif lead_ms > 0 then
        value, live_until = format('-%d%013d', lead_ms, ms), ms
      else
        value, live_until = format('%d', ms), ms
      end
      if live_until <= now then
        call('DEL', key)
      elseif value == nil then
        call('SET', key, format('%d', lead_ms), 'PXAT', format('%d', ms))
      else
        call('PSETEX', key, format('%d', live_until - now + slack), value)
      end
    end
    local remaining = floor((full - after) / window)
    if remaining < 0 then
      remaining = 0
    end
    local reset = ceil(after / limit)
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
