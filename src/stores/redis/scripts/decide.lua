-- One decision (1..N steps, all or nothing), shared by apply and batch. Included after the algorithms.
-- Appends 5 integers per step to `reply`: allowed (0/1), remaining, resetMs, retryAfterMs, blocked (0/1).

local function decide(steps, now, peek, slack, reply)
  local states, results = {}, {}
  local all = true
  for i, step in ipairs(steps) do
    local blocked_until, state = load(step, now)
    states[i] = state
    if blocked_until > now then
      -- A block adds a wait; it never shortens the one the units already impose.
      local left = blocked_until - now
      local units = step.algorithm.consume(step, state, now, true)
      results[i] = {
        blocked = true,
        allowed = false,
        remaining = 0,
        reset = math.max(left, units.reset),
        retry = math.max(left, units.retry),
      }
    else
      results[i] = step.algorithm.consume(step, state, now, peek)
    end
    all = all and results[i].allowed
  end

  if not peek then
    for i, step in ipairs(steps) do
      if all then
        step.algorithm.save(step, results[i].state, now, slack)
      elseif results[i].allowed then
        -- Nothing is charged: layers that would admit report their state as it is.
        results[i] = step.algorithm.consume(step, states[i], now, true)
      end
    end
  end

  for _, r in ipairs(results) do
    reply[#reply + 1] = r.allowed and 1 or 0
    reply[#reply + 1] = r.remaining
    reply[#reply + 1] = r.reset
    reply[#reply + 1] = r.retry
    reply[#reply + 1] = r.blocked and 1 or 0
  end
end
