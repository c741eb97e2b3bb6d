-- Epilogue of the flat single-step scripts (one-*.lua), included last: appends the decision's 3
-- reply integers (one-prelude.lua's header) and closes the loop that one-prelude.lua opened. The
-- including script leaves in locals `allowed`, `remaining`, `reset` and `retry` what the units say
-- (after its commit, which it skips when `held`). A block in force denies and adds its wait; it never
-- shortens the one the units impose (as decide.lua).
local r = #reply
if held then
  local left = blocked_until - now
  reply[r + 1] = -1
  reply[r + 2] = math.max(left, reset)
  reply[r + 3] = -1 - math.max(left, retry)
else
  reply[r + 1] = allowed and remaining or -1 - remaining
  reply[r + 2] = reset
  reply[r + 3] = retry
end
a = a + STRIDE
k = k + 2
end
return reply
