-- The block rule, read: the step's block ends at blocked_until (ms, 0 when none); `blocked` is true
-- while it is in force. A block in force denies the step whatever its units say (shared/reply.lua
-- adds its wait) and keeps a dead state's key (shared/drop.lua).
local blocked_until
if fresh then
  blocked_until = pre[k + 1]
else
  blocked_until = call('GET', block_key)
end
blocked_until = blocked_until and blocked_until + 0 or 0
local blocked = blocked_until > now
