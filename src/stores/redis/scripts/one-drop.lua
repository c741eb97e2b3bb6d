-- Part of the flat single-step scripts (one-*.lua), included right after the state is read. As
-- common.lua's load(): a stored state that is no longer meaningful is deleted unless a block in force
-- keeps its key, and with no live state a past block is deleted too. The including script sets
-- `stored` (a state was read) and `live` (it is still meaningful).
if not held then
  if stored and not live then
    redis.call('DEL', key)
  end
  if not live and blocked_until > 0 then
    redis.call('DEL', block_key)
  end
end
