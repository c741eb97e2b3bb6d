-- The block rule, answered: appends the step's 3 reply integers from `allowed`, `remaining`, `reset`
-- and `retry` (what the units say, after the commit). A block in force denies and adds its wait; it
-- never shortens the one the units impose.
local r = #reply
if blocked then
  local left = blocked_until - now
  reply[r + 1] = -1
  reply[r + 2] = left > reset and left or reset
  reply[r + 3] = -1 - (left > retry and left or retry)
else
  reply[r + 1] = allowed and remaining or -1 - remaining
  reply[r + 2] = reset
  reply[r + 3] = retry
end
