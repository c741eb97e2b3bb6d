-- Concurrency, twin of src/algorithms/concurrency.ts, as sections over the locals the
-- scripts set (README.md beside this file); `window` is the lease timeout.
-- State: a MessagePack array { expiresAt1, cost1, id1, expiresAt2, ... } of leases, live until the
-- last lease expires. A consume without a lease id takes a lease with the id ''.
--- @args limit window cost lease
--- @carry leases in_use last expired

--- @section read
local leases
--- @include "shared/get-state"
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

--- @section decide
-- The live leases: units in use, the last expiry (at least now), whether any stored lease has expired
-- and whether the live ones are in expiry order (they are unless the timeout or the clock changed).
local in_use, last = 0, now
local expired, ordered = false, true
if leases ~= nil then
  local previous = now
  for i = 1, #leases, 3 do
    local expires = leases[i]
    if expires > now then
      in_use = in_use + leases[i + 1]
      if expires > last then
        last = expires
      end
      if expires < previous then
        ordered = false
      end
      previous = expires
    else
      expired = true
    end
  end
end
local allowed = in_use + cost <= limit
local retry = 0
if not allowed then
  -- At the latest, enough leases time out: earliest expiries first.
  local free = limit - in_use
  if leases ~= nil and ordered then
    for i = 1, #leases, 3 do
      local expires = leases[i]
      if expires > now then
        free = free + leases[i + 1]
        if free >= cost then
          retry = expires - now
          break
        end
      end
    end
  elseif leases ~= nil then
    -- Units freed at each expiry, and the expiries in order (no comparator function: plain numbers).
    local freed, times = {}, {}
    for i = 1, #leases, 3 do
      local expires = leases[i]
      if expires > now then
        if freed[expires] == nil then
          freed[expires] = 0
          times[#times + 1] = expires
        end
        freed[expires] = freed[expires] + leases[i + 1]
      end
    end
    table.sort(times)
    for _, expires in ipairs(times) do
      free = free + freed[expires]
      if free >= cost then
        retry = expires - now
        break
      end
    end
  end
end

--- @section commit
-- The live leases in stored order, then the new one.
local nxt = leases
if nxt == nil then
  nxt = {}
elseif expired then
  nxt = {}
  for i = 1, #leases, 3 do
    if leases[i] > now then
      nxt[#nxt + 1] = leases[i]
      nxt[#nxt + 1] = leases[i + 1]
      nxt[#nxt + 1] = leases[i + 2]
    end
  end
end
local expires = now + window
nxt[#nxt + 1] = expires
nxt[#nxt + 1] = cost
nxt[#nxt + 1] = lease
in_use = in_use + cost
if expires > last then
  last = expires
end
if last <= now then
  call('DEL', key)
else
  call('PSETEX', key, format('%d', last - now + slack), cmsgpack.pack(nxt))
end

--- @section report
local remaining = limit - in_use
if remaining < 0 then
  remaining = 0
end
local reset = last - now

--- @section refund
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
