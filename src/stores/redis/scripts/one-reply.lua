-- Epilogue of the flat single-step scripts (one-*.lua), included last: appends the decision's 5
-- reply integers and closes the loop that one-prelude.lua opened. The including script leaves in
-- locals `allowed`, `remaining`, `reset` and `retry` what the units say (after its commit, which it
-- skips when `held`). A block in force denies and adds its wait; it never shortens the one the
-- units impose (as decide.lua).
if held then
  local left = blocked_until - now
  reply[#reply + 1] = 0
  reply[#reply + 1] = 0
  reply[#reply + 1] = math.max(left, reset)
  reply[#reply + 1] = math.max(left, retry)
  reply[#reply + 1] = 1
else
  reply[#reply + 1] = allowed and 1 or 0
  reply[#reply + 1] = remaining
  reply[#reply + 1] = reset
  reply[#reply + 1] = retry
  reply[#reply + 1] = 0
end
a = a + STRIDE
k = k + 2
end
return reply
