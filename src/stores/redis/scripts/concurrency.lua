-- Concurrency, twin of src/algorithms/concurrency.ts.
-- Stored value: MessagePack array { expiresAt1, cost1, id1, expiresAt2, ... } of leases.
-- Meaningful until the last lease expires.

local concurrency = {}

local function concurrency_last_expiry(leases, now)
  local last = now
  for _, lease in ipairs(leases) do
    last = math.max(last, lease.expires)
  end
  return last
end

function concurrency.read(step, now, keep_dead)
  local raw = redis.call('GET', step.key)
  if not raw then
    return nil
  end
  local flat = cmsgpack.unpack(raw)
  local leases = {}
  for i = 1, #flat, 3 do
    leases[#leases + 1] = { expires = flat[i], cost = flat[i + 1], id = flat[i + 2] }
  end
  if concurrency_last_expiry(leases, now) <= now then
    if not keep_dead then
      redis.call('DEL', step.key)
    end
    return nil
  end
  return leases
end

local function concurrency_live(leases, now)
  local out = {}
  if leases == nil then
    return out
  end
  for _, lease in ipairs(leases) do
    if lease.expires > now then
      out[#out + 1] = lease
    end
  end
  return out
end

function concurrency.consume(step, state, now, peek)
  local leases = concurrency_live(state, now)
  local held = 0
  for _, lease in ipairs(leases) do
    held = held + lease.cost
  end
  local allowed = held + step.cost <= step.limit
  local nxt = leases
  if allowed and not peek then
    nxt = {}
    for i, lease in ipairs(leases) do
      nxt[i] = lease
    end
    nxt[#nxt + 1] = { expires = now + step.window, cost = step.cost, id = step.lease }
    held = held + step.cost
  end
  local retry = 0
  if not allowed then
    -- At the latest, enough leases time out: earliest expiries first.
    local by_expiry = {}
    for i, lease in ipairs(leases) do
      by_expiry[i] = lease
    end
    table.sort(by_expiry, function(a, b)
      return a.expires < b.expires
    end)
    local free = step.limit - held
    for _, lease in ipairs(by_expiry) do
      free = free + lease.cost
      if free >= step.cost then
        retry = lease.expires - now
        break
      end
    end
  end
  return {
    allowed = allowed,
    state = nxt,
    remaining = math.max(0, step.limit - held),
    retry = retry,
    reset = concurrency_last_expiry(nxt, now) - now,
  }
end

function concurrency.save(step, leases, now, slack)
  if #leases == 0 then
    redis.call('DEL', step.key)
    return
  end
  local flat = {}
  for _, lease in ipairs(leases) do
    flat[#flat + 1] = lease.expires
    flat[#flat + 1] = lease.cost
    flat[#flat + 1] = lease.id
  end
  save_string(step, cmsgpack.pack(flat), concurrency_last_expiry(leases, now), now, slack)
end

function concurrency.refund(step, state, now, amount, slack)
  local leases = concurrency_live(state, now)
  local kept = {}
  if step.lease ~= '' then
    for _, lease in ipairs(leases) do
      if lease.id ~= step.lease then
        kept[#kept + 1] = lease
      end
    end
  else
    -- Leases taken by consume (no lease id) share the id '': give back `amount` units of them, the
    -- newest first. Named leases are left alone (src/algorithms/concurrency.ts does the same).
    local left = amount
    local gone = {}
    for i = #leases, 1, -1 do
      local lease = leases[i]
      if left > 0 and lease.id == '' then
        if lease.cost <= left then
          left = left - lease.cost
          gone[i] = true
        else
          lease.cost = lease.cost - left
          left = 0
        end
      end
    end
    for i, lease in ipairs(leases) do
      if not gone[i] then
        kept[#kept + 1] = lease
      end
    end
  end
  concurrency.save(step, kept, now, slack)
end

ALGORITHMS['concurrency'] = concurrency
