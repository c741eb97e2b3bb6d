-- The step's state, for an algorithm that keeps it as a string: `raw` (false when there is none),
-- from the call's MGET while the key is fresh (shared/step.lua), else from Redis.
local raw
if fresh then
  raw = pre[k]
else
  raw = call('GET', key)
end
