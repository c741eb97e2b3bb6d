-- Built by scripts/build-lua.mjs from packages/sluice/src/stores/redis/scripts/: do not edit.
-- variants/refund.lua with every algorithm's file.
-- Sluice refund: give back `cost` units of each step (concurrency: release lease `lease`, or without
-- one `cost` units of the leases taken without one).
-- KEYS: per step, the state key then the block key (all in one hash slot).
-- ARGV: now (ms, or "" for the Redis clock), then per step the algorithm's name and its arguments
--       as in apply.lua (the cost unsigned).
-- Reply: the number of steps that had state to refund.

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
local refunded = 0
local a, k, n = 2, 1, #ARGV
while a <= n do
  local algorithm = ARGV[a]
  a = a + 1
  -- `again` for a step of a call whose client does not mark the steps that name a key again (apply's
  -- does, in its runs): the call keeps the keys it has named in `seen`.
  if pre then
    if not seen then
      seen = {}
    end
    local named = KEYS[k]
    again = seen[named] == true
    seen[named] = true
  end
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
  if algorithm == 'concurrency' then
    -- One step's arguments: limit, window, cost, lease.
    if ARGV[a] ~= limit_arg or ARGV[a + 1] ~= window_arg then
      limit_arg, window_arg = ARGV[a], ARGV[a + 1]
      limit, window = limit_arg + 0, window_arg + 0
    end
    local cost, lease = ARGV[a + 2] + 0, ARGV[a + 3]
    a = a + 4
    local leases
    -- The step's state, for an algorithm that keeps it as a string: `raw` (false when there is none),
    -- from the call's MGET while the key is fresh (shared/step.lua), else from Redis.
    local raw
    if fresh then
      raw = pre[k]
    else
      raw = call('GET', key)
    end
    if raw then
      leases = cmsgpack.unpack(raw)
      local last = now
      for i = 1, #leases, 3 do
        if leases[i] > last then
          last = leases[i]
        end
      end
      if last <= now then
        leases = nil
      end
    end
    local stored, live = raw ~= false, leases ~= nil
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
    if live then
      -- The live leases but the one released: lease `lease`, or without an id `cost` units of the leases
      -- taken without one, newest first (named leases are left alone, as in src/algorithms/concurrency.ts).
      local kept = {}
      if lease ~= '' then
        for i = 1, #leases, 3 do
          if leases[i] > now and leases[i + 2] ~= lease then
            kept[#kept + 1] = leases[i]
            kept[#kept + 1] = leases[i + 1]
            kept[#kept + 1] = leases[i + 2]
          end
        end
      else
        local left, gone = cost, {}
        for i = #leases - 2, 1, -3 do
          if left > 0 and leases[i] > now and leases[i + 2] == '' then
            if leases[i + 1] <= left then
              left = left - leases[i + 1]
              gone[i] = true
            else
              leases[i + 1] = leases[i + 1] - left
              left = 0
            end
          end
        end
        for i = 1, #leases, 3 do
          if leases[i] > now and not gone[i] then
            kept[#kept + 1] = leases[i]
            kept[#kept + 1] = leases[i + 1]
            kept[#kept + 1] = leases[i + 2]
          end
        end
      end
      if #kept == 0 then
        call('DEL', key)
      else
        local last = now
        for i = 1, #kept, 3 do
          if kept[i] > last then
            last = kept[i]
          end
        end
        call('PSETEX', key, format('%d', last - now + slack), cmsgpack.pack(kept))
      end
      refunded = refunded + 1
    end
  elseif algorithm == 'fixed-window' then
    -- One step's arguments: limit, window, period, cost.
    if ARGV[a] ~= limit_arg or ARGV[a + 1] ~= window_arg or ARGV[a + 2] ~= period_arg then
      limit_arg, window_arg, period_arg = ARGV[a], ARGV[a + 1], ARGV[a + 2]
      limit, window, period = limit_arg + 0, window_arg + 0, period_arg + 0
    end
    local cost = ARGV[a + 3] + 0
    a = a + 4
    local start, count, finish
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
      if c1 == nil then
        count, finish = raw + 0, call('PEXPIRETIME', key)
        start = finish - window
      else
        local c2 = find(raw, ':', c1 + 1, true)
        start = sub(raw, 1, c1 - 1) + 0
        finish = start + window
        if c2 then
          count = sub(raw, c1 + 1, c2 - 1) + 0
          local span = sub(raw, c2 + 1) + 0
          if span < window then
            finish = start + span
          end
        else
          count = sub(raw, c1 + 1) + 0
        end
      end
      if finish <= now or start < period then
        start = nil
      end
    end
    local stored, live = raw ~= false, start ~= nil
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
    if live then
      count = count - cost
      if count < 0 then
        count = 0
      end
      if count == 0 then
        call('DEL', key)
      else
        -- Write count until finish. A live window ends after now, a fresh one at now + window; a calendar
        -- period drawn by the client's clock may have ended by the Redis clock (kept 1 ms then).
        if compact and finish > now and finish - start == window then
          call('SET', key, format('%d', count), 'PXAT', format('%d', finish))
        else
          local value = format('%d:%d:%d', start, count, finish - start)
          local ttl = finish - now + slack
          if ttl < 1 then
            ttl = 1
          end
          call('PSETEX', key, format('%d', ttl), value)
        end
      end
      refunded = refunded + 1
    end
  elseif algorithm == 'gcra' then
    -- One step's arguments: limit, window, capacity, cost.
    if ARGV[a] ~= limit_arg or ARGV[a + 1] ~= window_arg or ARGV[a + 2] ~= capacity_arg then
      limit_arg, window_arg, capacity_arg = ARGV[a], ARGV[a + 1], ARGV[a + 2]
      limit, window, capacity = limit_arg + 0, window_arg + 0, capacity_arg + 0
    end
    local cost = ARGV[a + 3] + 0
    a = a + 4
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
    if live then
      -- The later of the stored TAT and now; debt = how far it is ahead of now, in 1/limit ms.
      if tat_ms == nil or tat_ms < now then
        tat_ms, tat_rem = now, 0
      end
      local full = capacity * window
      local before = (tat_ms - now) * limit + tat_rem
      -- Give back the cost, never more than the debt there is.
      local taken = cost * window
      if before < taken then
        taken = before
      end
      local delta = -taken
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
      refunded = refunded + 1
    end
  elseif algorithm == 'sliding-window-counter' then
    -- One step's arguments: limit, window, period, following, cost.
    if ARGV[a] ~= limit_arg or ARGV[a + 1] ~= window_arg or ARGV[a + 2] ~= period_arg or ARGV[a + 3] ~= following_arg then
      limit_arg, window_arg, period_arg, following_arg = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
      limit, window, period, following = limit_arg + 0, window_arg + 0, period_arg + 0, following_arg + 0
    end
    local cost = ARGV[a + 4] + 0
    a = a + 5
    local start, previous, current
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
      local same_grid, counted
      if c1 == nil then
        local packed = raw + 0
        previous = floor(packed / 100000000)
        current = packed - previous * 100000000
        start = call('PEXPIRETIME', key) - window
        if current > 0 then
          start = start - window
        end
        same_grid, counted = start % window == 0, window
      else
        local c2 = find(raw, ':', c1 + 1, true)
        local c3 = find(raw, ':', c2 + 1, true)
        start = sub(raw, 1, c1 - 1) + 0
        previous = sub(raw, c1 + 1, c2 - 1) + 0
        if c3 then
          current = sub(raw, c2 + 1, c3 - 1) + 0
          counted = sub(raw, c3 + 1) + 0
          same_grid = counted == window
        else
          current = sub(raw, c2 + 1) + 0
          same_grid = start % window == 0
        end
      end
      local live_until = start
      if current > 0 then
        live_until = start + 2 * window
      elseif previous > 0 then
        live_until = start + window
      end
      if period >= 0 then
        -- Counts of this period (or of a later one, the clock having gone back), or the current count
        -- of the period just before; anything older counts nothing.
        if start >= period then
          if current == 0 and previous == 0 then
            start = nil
          end
        elseif not (counted and start + counted == period and current > 0) then
          start = nil
        end
      elseif not same_grid or live_until <= now then
        start = nil
      end
    end
    local stored, live = raw ~= false, start ~= nil
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
    if live then
      -- The view at now: the window holding now, with the previous window's count.
      local elapsed
      if period >= 0 then
        -- The calendar period. Now lies outside it only on a server clock the client's has not reached
        -- or has passed: the step counts in the client's period, at its start or end.
        elapsed = now - period
        if elapsed < 0 then
          elapsed = 0
        elseif elapsed > window then
          elapsed = window
        end
        if start == nil then
          start, previous, current = period, 0, 0
        elseif start < period then
          start, previous, current = period, current, 0
        else
          start = period
        end
      else
        local aligned = floor(now / window) * window
        elapsed = now - aligned
        if start == nil or aligned >= start + 2 * window then
          start, previous, current = aligned, 0, 0
        elseif aligned < start then
          -- The clock stepped backwards: stay at the start of the stored window, the most conservative point.
          elapsed = 0
        elseif aligned > start then
          start, previous, current = aligned, current, 0
        end
      end
      -- What the current window cannot give back comes out of the previous one.
      local spill = cost - current
      if spill > 0 then
        previous = previous - spill
      end
      if previous < 0 then
        previous = 0
      end
      current = current - cost
      if current < 0 then
        current = 0
      end
      if current == 0 and previous == 0 then
        call('DEL', key)
      else
        -- Write start:previous:current:window, live as read says.
        local live_until = start
        if current > 0 then
          live_until = start + window + following
        elseif previous > 0 then
          live_until = start + window
        end
        if live_until <= now then
          call('DEL', key)
        elseif compact and period < 0 and current < 100000000 and previous < 90000000 then
          local value = format('%d', previous * 100000000 + current)
          call('SET', key, value, 'PXAT', format('%d', live_until))
        else
          local value = format('%d:%d:%d:%d', start, previous, current, window)
          call('PSETEX', key, format('%d', live_until - now + slack), value)
        end
      end
      refunded = refunded + 1
    end
  elseif algorithm == 'sliding-window-log' then
    -- One step's arguments: limit, window, cost.
    if ARGV[a] ~= limit_arg or ARGV[a + 1] ~= window_arg then
      limit_arg, window_arg = ARGV[a], ARGV[a + 1]
      limit, window = limit_arg + 0, window_arg + 0
    end
    local cost = ARGV[a + 2] + 0
    a = a + 3
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
    if live then
      -- Give back the newest units: a refund usually follows the consume it undoes. The entry holding the
      -- last unit kept becomes the newest, shrunk to what is kept of it.
      local need = count - cost
      if need <= 0 then
        call('DEL', key)
      else
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
        call('LTRIM', key, 2 * first, 2 * holder + 2)
        call('LSET', key, '-1', format('%d', (start + need) % TOTAL_MODULUS))
        -- The log ends a window after its new newest entry, never later than it was to.
        local kept = call('LINDEX', key, -2) + 0
        local ends = kept + window
        if log_end < ends then
          ends = log_end
        end
        call('LSET', key, '0', format('%d:%d', start, ends - kept))
        call('PEXPIRE', key, format('%d', ends - now + slack))
      end
      refunded = refunded + 1
    end
  elseif algorithm == 'token-bucket' then
    -- One step's arguments: limit, window, capacity, cost.
    if ARGV[a] ~= limit_arg or ARGV[a + 1] ~= window_arg or ARGV[a + 2] ~= capacity_arg then
      limit_arg, window_arg, capacity_arg = ARGV[a], ARGV[a + 1], ARGV[a + 2]
      limit, window, capacity = limit_arg + 0, window_arg + 0, capacity_arg + 0
    end
    local cost = ARGV[a + 3] + 0
    a = a + 4
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
    if live then
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
      local after = cur + cost * window
      if after > full then
        after = full
      end
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
      refunded = refunded + 1
    end
  else
    return redis.error_reply('ERR sluice: unknown algorithm ' .. tostring(algorithm))
  end
  k = k + 2
end
return refunded
