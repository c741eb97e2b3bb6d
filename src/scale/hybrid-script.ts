// The one Redis script of hybrid mode. SHA-1 computed at load time from the source.
import { createHash } from 'node:crypto'

/**
 * KEYS[1]  the counter of one (policy, subject, window): `prefix:{subject}:policy:h:window`
 * ARGV[1]  units to add (0 only reads; negative after refunds)
 * ARGV[2]  time to live in ms (two windows)
 * Reply:   the global count after the addition (integer)
 */
export const HYBRID_ADD_SOURCE = `local n = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return n
`

export const HYBRID_ADD_SHA = createHash('sha1').update(HYBRID_ADD_SOURCE).digest('hex')
