-- The step's keys (KEYS[k] and KEYS[k + 1]), and whether the call's MGET holds their values: only
-- the first time the call names the key (`fresh`, not `again`), since a step decided before may
-- have written it.
local key, block_key = KEYS[k], KEYS[k + 1]
local fresh = pre ~= nil and not again
