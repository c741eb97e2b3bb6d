-- The step's block: blocked_until (ms, 0 when none) and whether it is in force (`held`). A block in
-- force keeps a dead state's key (drop.lua deletes what is no longer meaningful).
local blocked_until = redis.call('GET', block_key)
blocked_until = blocked_until and blocked_until + 0 or 0
local held = blocked_until > now
