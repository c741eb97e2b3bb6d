-- Token bucket, twin of src/algorithms/token-bucket.ts, as sections over the locals the
-- scripts set (README.md beside this file).
-- State "level:at:span": level = tokens x window (an integer below full = capacity x window) at time
-- `at` (ms), live until at + span, when it is full again under the parameters that wrote it. Read
-- under other parameters, the level keeps its number (at most full) and the bucket is full no later
-- than at + span: the floor full - span x limit (what the twin's levelOf does).
-- Values written without a span are read as written under the parameters in force: "level:at", and
-- the one-integer layout "1", level in d digits, `at` modulo 10^kd in kd = 18 - d digits (d = digits
-- of full), `at` recovered as the value with that remainder nearest to now. That layout depends on
-- capacity x window, so a value written under another burst or window reads wrong: it counts only
-- when its time is not after now (the wrong reading could put it years ahead) and its level is cut
-- at full like any other.
-- Compact (on the Redis clock, shared/call.lua), written when `at` is now and the level is not
-- negative: one integer in a key that expires when the bucket is full again (E = at + span); `at` is
-- read back as E minus the time to refill from the level under the parameters in force (exact while
-- they are unchanged). The integer is the whole tokens of the level (below 10^12) when the part of a
-- token above them is a whole number of milliseconds' refill, else -1 - level. A whole-token value
-- with such a part reads back as the whole tokens at that many milliseconds before `at`: the same
-- level at every time after, and the same expiry, while the value stays a small integer (one Redis
-- shares, below 10,000). When limit divides window every level is such a value.
--- @args limit window capacity cost
--- @carry full cur cur_at need lag after

--- @section read
local full = capacity * window
local level, at
--- @include "shared/get-state"
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

--- @section refill
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

--- @section save
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

--- @section decide
--- @include "refill"
local need = cost * window
local lag = cur_at - now
local allowed = cur >= need
local retry = 0
if not allowed then
  retry = lag + ceil((need - cur) / limit)
end
local after = cur

--- @section commit
after = cur - need
--- @include "save"

--- @section report
local reset = 0
if after < full then
  reset = lag + ceil((full - after) / limit)
end
-- A forced charge (variants/charge.lua) can leave the level below zero: nothing is left then.
local remaining = floor(after / window)
if remaining < 0 then
  remaining = 0
end

--- @section refund
--- @include "refill"
local after = cur + cost * window
if after > full then
  after = full
end
--- @include "save"
