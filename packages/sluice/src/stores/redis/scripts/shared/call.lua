-- Every script's setup, once per call: the clock, the call's keys read ahead, and the policy
-- numbers each algorithm's `args` fills.
--
-- The clock: ARGV[1] is now in ms, or "" for the Redis clock ("v": the Redis clock, writing the
-- value layouts only: the store's `compactValues: false`). In client clock mode keys live
-- CLIENT_CLOCK_SLACK_MS longer than they are meaningful (`slack`), to absorb host clock skew.
-- Cheap forms, measured with callgrind (bench/lua-cost.ts): a numeric string is converted with
-- `s + 0`, not tonumber(s), which in Redis's Lua 5.1 runs strtod twice; whole numbers are written
-- with '%d' (a long: exact up to 2^53), not '%.0f', whose float printing costs about 2k instructions
-- per number (so does passing a number to redis.call: Redis 7.0 prints it with '%.17g'); a state is
-- written with PSETEX key ms value (what SET key value PX ms does, one argument fewer); the larger
-- or smaller of two numbers is a comparison, not math.max or math.min, whose call costs about 300
-- instructions (a token bucket's decision made three: 2.3% of its instructions at 32 per call, keys
-- read back).
-- Compact states (`compact`): on the Redis clock, an algorithm may keep a state's time as the key's
-- own expiry (SET ... PXAT, read back with PEXPIRETIME, Redis 7.0 and later) and only a small
-- integer as its value, which Redis stores in the key object (int encoding; below 10,000 a shared
-- object). With a client clock the expiry runs on another clock than the state: values carry times.
-- The library functions the steps use, as locals: `math.floor(x)` reads the global `math` and
-- then its field on every use, a local is one register (about 4% fewer instructions per decision
-- at 16 per call, by bench/lua-cost.ts). KEYS and ARGV too: globals, read per step.
local KEYS, ARGV = KEYS, ARGV
local call = redis.call
local ceil, floor = math.ceil, math.floor
local format, find, sub, byte = string.format, string.find, string.sub, string.byte
local CLIENT_CLOCK_SLACK_MS = 1000
local now, slack, compact
if ARGV[1] == '' or ARGV[1] == 'v' then
  local t = call('TIME')
  now, slack = t[1] * 1000 + floor(t[2] / 1000), 0
  compact = ARGV[1] == '' and (redis.REDIS_VERSION_NUM or 0) >= 0x070000
else
  now, slack, compact = ARGV[1] + 0, CLIENT_CLOCK_SLACK_MS, false
end
-- A call of more than one step reads all its keys with one MGET: one command instead of two per
-- step (8-10% fewer instructions per decision at 16 per call, by bench/lua-cost.ts). One step alone
-- reads its keys itself: an MGET and its table cost more than they save there. MGET answers nil
-- for a key that holds no string (a sliding log's list), and that algorithm reads its own. A value
-- read here holds until the call writes its key: a step that names a key a step before it named
-- (`again`) reads the key itself (`fresh` in shared/step.lua). Each variant sets `again` before its
-- steps: apply from the client's runs, the others from the keys named so far (shared/seen.lua,
-- which keeps them in `seen`).
local pre, seen, again
if #KEYS > 2 then
  pre = call('MGET', unpack(KEYS))
end
-- The policy numbers of the step being decided, and the ARGV strings they were read from: each
-- algorithm's `args` reads them again only when they change (a call's steps usually share a policy).
local limit_arg, window_arg, period_arg, following_arg, capacity_arg
local limit, window, period, following, capacity
