-- Fixed window, twin of src/algorithms/fixed-window.ts, as fragments over the locals that
-- scripts/variants/*.lua set (see README.md beside this file).
-- State "start:count", live until start + window.
--- @args limit window cost
--- @carry start count finish

--- @fragment read
local start, count
local raw = redis.call('GET', key)
if raw then
  local colon = string.find(raw, ':', 1, true)
  start, count = string.sub(raw, 1, colon - 1) + 0, string.sub(raw, colon + 1) + 0
  if start + window <= now then
    start = nil
  end
end
local stored, live = raw ~= false, start ~= nil

--- @fragment decide
-- A live state is the current window (a clock that stepped backwards stays in it); else a fresh one.
if start == nil then
  start, count = now, 0
end
local finish = start + window
local allowed = count + cost <= limit
local retry = 0
if not allowed then
  retry = finish - now
end

--- @fragment commit
count = count + cost
-- finish > now: a live window ends after now, a fresh one at now + window.
redis.call('PSETEX', key, string.format('%d', finish - now + slack), string.format('%d:%d', start, count))

--- @fragment report
local reset = 0
if count > 0 then
  reset = finish - now
end
local remaining = math.max(0, limit - count)

--- @fragment refund
count = math.max(0, count - cost)
if count == 0 then
  redis.call('DEL', key)
else
  redis.call('PSETEX', key, string.format('%d', start + window - now + slack), string.format('%d:%d', start, count))
end
