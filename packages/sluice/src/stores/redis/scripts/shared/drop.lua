-- Right after the algorithm's read, which sets `stored` (a state was read) and `live` (it is still
-- meaningful): as the memory store sees its entry, a state that is no longer meaningful is deleted
-- unless a block in force keeps its key, and with no live state a past block is deleted too.
if not blocked then
  if stored and not live then
    call('DEL', key)
  end
  if not live and blocked_until > 0 then
    call('DEL', block_key)
  end
end
