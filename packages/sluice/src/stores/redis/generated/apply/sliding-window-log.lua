-- Built by scripts/build-lua.mjs from packages/sluice/src/stores/redis/scripts/: do not edit.
-- variants/apply.lua with sliding-window-log.lua: one step's arguments are limit, window, cost.
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
  -- One step's arguments: limit, window, cost.
  if ARGV[a] ~= limit_arg or ARGV[a + 1] ~= window_arg then
    limit_arg, window_arg = ARGV[a], ARGV[a + 1]
    limit, window = limit_arg + 0, window_arg + 0
  end
  local cost = ARGV[a + 2] + 0
  a = a + 3
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
    -- Twin of LOG_TOTAL_MODULUS in src/algorithms/sliding-window-log.ts: totals stay small and exact,
    -- and below any time since 1987, so a list that starts with a number >= TOTAL_MODULUS (a time, not
    -- a total) is not a log of this layout: it reads as no state and is replaced, never misread.
    local TOTAL_MODULUS = 549755813888 -- 2^39
    -- `first` is the index (0-based) of the oldest entry still in the window, `start` the total before
    -- it, `count` the live units; `first_total` (the oldest live entry's total) is known when that entry
    -- is the list's first, `entries` (the entry count) when it was needed; `log_end` is when the log
    -- ends, its newest entry + `span`.
    local first, start, count, newest, total, first_total, entries = 0, 0, 0, nil, 0, nil, nil
    local log_end, span
    -- One read serves a key of one entry ([start, time, total]); a fourth element says there are more.
    local head = call('LRANGE', key, 0, 3)
    local stored = #head > 0
    local head_start
    if stored then
      local colon = find(head[1], ':', 1, true)
      if colon then
        head_start, span = sub(head[1], 1, colon - 1) + 0, sub(head[1], colon + 1) + 0
      else
        head_start, span = head[1] + 0, window
      end
    end
    -- A list that starts with a time (>= TOTAL_MODULUS) is not in this layout: it reads as no state, so
    -- it is deleted, as after a reset.
    if stored and head_start < TOTAL_MODULUS then
      if #head == 3 then
        newest, total = head[2] + 0, head[3]
      else
        local tail = call('LRANGE', key, -2, -1)
        newest, total = tail[1] + 0, tail[2]
      end
      log_end = newest + span
      if newest + window <= now or log_end <= now then
        newest = nil
      else
        total = total + 0
        if head[2] + window > now then
          -- The oldest entry is still in the window, so all are: no search.
          start, first_total = head_start, head[3] + 0
        else
          -- The oldest entry has left the window: search for the first that has not.
          entries = (call('LLEN', key) - 1) / 2
          local lo, hi = 1, entries - 1
          while lo < hi do
            local mid = floor((lo + hi) / 2)
            if call('LINDEX', key, 2 * mid + 1) + window <= now then
              lo = mid + 1
            else
              hi = mid
            end
          end
          first = lo
          start = call('LINDEX', key, 2 * first) + 0
        end
        count = total - start
        if count < 0 then
          count = count + TOTAL_MODULUS
        end
      end
    end
    local live = newest ~= nil
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
    -- A clock that stepped backwards records at the newest time seen, keeping the log ordered.
    local at = now
    if count > 0 then
      if newest > now then
        at = newest
      end
    end
    local allowed = count + cost <= limit
    local retry = 0
    if not allowed and count > 0 then
      -- Wait until enough of the oldest units leave the window for `cost` to fit: the time of the entry
      -- holding the `need`-th oldest live unit (an entry's units all leave together).
      local need = count + cost - limit
      -- holder: the index of the live entry holding the `need`-th oldest live unit (need >= 1).
      local holder, search, lo = first, true, first
      if first_total ~= nil then
        -- The oldest live entry was read already: often it alone is enough.
        local units = first_total - start
        if units < 0 then
          units = units + TOTAL_MODULUS
        end
        search, lo = units < need, first + 1
      end
      if search then
        entries = entries or (call('LLEN', key) - 1) / 2
        local hi = entries - 1
        while lo < hi do
          local mid = floor((lo + hi) / 2)
          local units = call('LINDEX', key, 2 * mid + 2) - start
          if units < 0 then
            units = units + TOTAL_MODULUS
          end
          if units >= need then
            hi = mid
          else
            lo = mid + 1
          end
        end
        holder = lo < hi and lo or hi
      end
      -- Entry 0's time was read with the head.
      local holder_at = holder == 0 and head[2] or call('LINDEX', key, 2 * holder + 1)
      retry = holder_at + window
      if log_end < retry then
        retry = log_end
      end
      retry = retry - now
    end
    if allowed and not peek and not blocked then
      if cost > 0 then
        -- Drop what left the window, add `cost` units at `at` (to the newest entry when it is at that time).
        if count == 0 then
          -- A fresh list: start 0, then this entry.
          call('RPUSH', key, format('0:%d', window), format('%d', at), format('%d', cost))
        else
          if first > 0 then
            call('LTRIM', key, 2 * first, -1)
          end
          local sum = format('%d', (total + cost) % TOTAL_MODULUS)
          if at == newest then
            call('LSET', key, '-1', sum)
          else
            call('RPUSH', key, format('%d', at), sum)
          end
          -- The log now ends a window after this entry: a trimmed head (a bare total) or another span
          -- is rewritten.
          if first > 0 or span ~= window then
            call('LSET', key, '0', format('%d:%d', start, window))
          end
        end
        count = count + cost
        newest, log_end = at, at + window
        call('PEXPIRE', key, format('%d', at + window - now + slack))
      end
    end
    local reset = 0
    if newest ~= nil then
      reset = newest + window
      if log_end < reset then
        reset = log_end
      end
      reset = reset - now
    end
    local remaining = limit - count
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
