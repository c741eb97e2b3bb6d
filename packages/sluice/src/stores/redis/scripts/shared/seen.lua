-- `again` for a step of a call whose client does not mark the steps that name a key again (apply's
-- does, in its runs): the call keeps the keys it has named in `seen`.
if pre then
  if not seen then
    seen = {}
  end
  local named = KEYS[k]
  again = seen[named] == true
  seen[named] = true
end
