-- Sluice apply for one token-bucket step, flat: the same decision as apply.lua with token-bucket.lua
-- (src/algorithms/token-bucket.ts), inlined for the common single-policy call. Keep them in step:
-- the conformance vectors and the differential test run both.

local STRIDE, CAPACITY = 4, true
-- Per policy: full = capacity x window, and the packed layout of token-bucket.lua: "1", level in d
-- digits, at modulo m = 10^kd in kd digits (packed = false when that does not fit), written with the
-- format string `layout`.
local full, d, kd, m, packed, layout
--- @include "one-prelude"

if policy_new then
  full = capacity * window
  d = #string.format('%d', full)
  kd = 18 - d
  m = 10 ^ kd
  packed = kd >= 1 and 2 * (math.ceil(full / limit) + 86400000) < m
  if packed then
    layout = string.format('1%%0%dd%%0%dd', d, kd)
  end
end

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
--- @include "one-drop"

-- Refill; a clock that stepped backwards refills nothing and keeps the newest time seen.
local cur, cur_at = full, now
if level ~= nil then
  cur_at = math.max(now, at)
  cur = math.min(full, level + (cur_at - at) * limit)
end
local need = cost * window
local lag = cur_at - now
local allowed = cur >= need
local retry = 0
if not allowed then
  retry = lag + math.ceil((need - cur) / limit)
end

local after = cur
if allowed and not peek and not held then
  after = cur - need
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
end
local reset = 0
if after < full then
  reset = lag + math.ceil((full - after) / limit)
end
local remaining = math.floor(after / window)
--- @include "one-reply"
