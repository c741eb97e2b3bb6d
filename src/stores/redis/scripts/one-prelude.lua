-- Prelude of the flat single-step scripts (one-*.lua): plain statements, no function definitions, so
-- a call pays only for its own decision. Same KEYS and ARGV as apply with one step.
-- Sets: peek, now, slack, limit, window, capacity, cost, key, block_key, blocked_until, held.

local peek = ARGV[1] == 'peek'
local now
if ARGV[2] ~= '' then
  now = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local slack = tonumber(ARGV[3])
local limit, window, capacity, cost = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local key, block_key = KEYS[1], KEYS[2]
-- As common.lua's load(): a block in force keeps a dead state's key; otherwise a dead state is
-- dropped, and with it a past block.
local blocked_until = tonumber(redis.call('GET', block_key) or '0')
local held = blocked_until > now
