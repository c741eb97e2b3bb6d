-- Token bucket, twin of src/algorithms/token-bucket.ts, as fragments over the locals that
-- scripts/variants/*.lua set (see README.md beside this file).
-- State: level = tokens x window (an integer below full = capacity x window) at time `at` (ms), live
-- until the bucket is full again: at + ceil((full - level) / limit).
-- Stored value, packed when it fits: one 19-digit decimal integer that Redis keeps inside the key
-- object (int encoding, no separate string): "1", then level in d digits (d = digits of full), then
-- at modulo m = 10^kd in kd = 18 - d digits, written with the format string `layout`. `at` is
-- recovered as the value with that remainder nearest to now, which is exact while |at - now| < m / 2:
-- a live key has at > now - ceil(full / limit), and packing is used only when that span plus one day
-- (a clock stepping back) fits (`packed`). Otherwise the value is the text "level:at". The layout
-- depends on capacity x window: changing them reads old keys wrong for at most their remaining life.
--- @args limit window capacity cost
--- @policy full d kd m packed layout
--- @carry cur cur_at need lag after

--- @fragment policy
full = capacity * window
d = #string.format('%d', full)
kd = 18 - d
m = 10 ^ kd
packed = kd >= 1 and 2 * (math.ceil(full / limit) + 86400000) < m
if packed then
  layout = string.format('1%%0%dd%%0%dd', d, kd)
end

--- @fragment read
local level, at
local raw = redis.call('GET', key)
if raw then
  local colon = string.find(raw, ':', 1, true)
  if colon then
    level, at = string.sub(raw, 1, colon - 1) + 0, string.sub(raw, colon + 1) + 0
  elseif packed and #raw == 1 + d + kd then
    level = string.sub(raw, 2, 1 + d) + 0
    local r = string.sub(raw, 2 + d) + 0
    at = r + m * math.floor((now - r) / m + 0.5)
  end
  if level == nil or level >= full or at + math.ceil((full - level) / limit) <= now then
    level = nil
  end
end
local stored, live = raw ~= false, level ~= nil

--- @fragment refill
-- Refill; a clock that stepped backwards refills nothing and keeps the newest time seen.
local cur, cur_at = full, now
if level ~= nil then
  cur_at = math.max(now, at)
  cur = math.min(full, level + (cur_at - at) * limit)
end

--- @fragment save
-- Write `after` tokens x window at cur_at.
if after >= full then
  redis.call('DEL', key)
else
  local expires_at = cur_at + math.ceil((full - after) / limit)
  if expires_at <= now then
    redis.call('DEL', key)
  else
    local value
    if packed and after >= 0 then
      local r = cur_at % m
      if r < 0 then
        r = r + m
      elseif r >= m then
        r = r - m
      end
      value = string.format(layout, after, r)
    else
      value = string.format('%d:%d', after, cur_at)
    end
    redis.call('PSETEX', key, string.format('%d', expires_at - now + slack), value)
  end
end

--- @fragment decide
--- @use refill
local need = cost * window
local lag = cur_at - now
local allowed = cur >= need
local retry = 0
if not allowed then
  retry = lag + math.ceil((need - cur) / limit)
end
local after = cur

--- @fragment commit
after = cur - need
--- @use save

--- @fragment report
local reset = 0
if after < full then
  reset = lag + math.ceil((full - after) / limit)
end
-- A forced charge (variants/charge.lua) can leave the level below zero: nothing is left then.
local remaining = math.max(0, math.floor(after / window))

--- @fragment refund
--- @use refill
local after = math.min(full, cur + cost * window)
--- @use save
