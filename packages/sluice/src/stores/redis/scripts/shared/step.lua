-- The step's keys (KEYS[k] and KEYS[k + 1]), and whether the call's MGET holds their values: only
-- the first time the call names the key (`fresh`), since a step decided before may have written it.
local key, block_key = KEYS[k], KEYS[k + 1]
local fresh = false
if pre then
  if seen then
    fresh = not seen[key]
    seen[key] = true
  else
    fresh = not again
  end
end
