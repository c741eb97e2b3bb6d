// The exchange's Redis scripts. Inline rather than under src/stores/redis/scripts/: hash and sorted
// set commands, no algorithm in them. Every key through KEYS; a call on Cluster carries one key, or
// the two keys of the demand index, which share one slot. The replies are read back here too.
import type { GlobalPolicy } from './exchange.js'
import { EMPTY_LEDGER, type Ledger } from './shares.js'

/**
 * KEYS: one hash per (policy id, key, window). ARGV: field (this instance), ttlMs, then one count
 * per key. Sets the field to the count, which may be lower than the stored one (a refund or a reset
 * lowers this instance's count), then the expiry. Reply: 0.
 */
export const WRITE_COUNTS = `local field, ttl = ARGV[1], ARGV[2]
for i, key in ipairs(KEYS) do
  local count = tonumber(ARGV[i + 2])
  local stored = tonumber(redis.call('HGET', key, field) or '-1')
  if count ~= stored then redis.call('HSET', key, field, count) end
  redis.call('PEXPIRE', key, ttl)
end
return 0`

/** KEYS: hashes as above. ARGV: none. Reply: per key, the sum of its fields (the region's total). */
export const READ_COUNTS = `local out = {}
for i, key in ipairs(KEYS) do
  local sum = 0
  for _, v in ipairs(redis.call('HVALS', key)) do sum = sum + tonumber(v) end
  out[i] = sum
end
return out`

/**
 * The region's demand index. KEYS[1]: sorted set of entries by the ms they were last written;
 * KEYS[2]: hash of entry -> units asked in the writer's last sync period. An entry is
 * "instance\npolicy id\nlimit\nwindowMs\nkey". ARGV: nowMs, keepMs, maxEntries, then entry, units
 * pairs. Entries older than keepMs and the oldest past maxEntries are dropped. Reply: 0.
 */
export const WRITE_DEMAND = `local now, keep, most = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 4, #ARGV, 2 do
  redis.call('ZADD', KEYS[1], now, ARGV[i])
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - keep))
local over = redis.call('ZCARD', KEYS[1]) - #old - most
if over > 0 then
  for _, e in ipairs(redis.call('ZRANGE', KEYS[1], #old, #old + over - 1)) do old[#old + 1] = e end
end
for _, e in ipairs(old) do
  redis.call('ZREM', KEYS[1], e)
  redis.call('HDEL', KEYS[2], e)
end
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('PEXPIRE', KEYS[2], keep)
return 0`

/**
 * KEYS: the demand index as above. ARGV: sinceMs, maxEntries. Reply: entry, units, ... for the
 * entries written since sinceMs, newest first.
 */
export const READ_DEMAND = `local entries = redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, e in ipairs(entries) do
  out[#out + 1] = e
  out[#out + 1] = redis.call('HGET', KEYS[2], e) or '0'
end
return out`

/**
 * KEYS: one ledger hash per (policy id, key): field v (version) and g:<region> (units given to that
 * region, cumulative). ARGV: none. Reply: per key, its fields and values as HGETALL lists them.
 */
export const READ_LEDGERS = `local out = {}
for i, key in ipairs(KEYS) do out[i] = redis.call('HGETALL', key) end
return out`

/**
 * KEYS[1]: a ledger hash. ARGV: the version the give was planned on, ttlMs, then region, units
 * pairs. Applied only if the ledger is still at that version (another instance of the region may
 * have given meanwhile, and its give would be counted twice): the units are added, the version
 * raised. Reply: the version after the call, negative when nothing was applied.
 */
export const GIVE = `local version = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if version ~= tonumber(ARGV[1]) then return -version - 1 end
for i = 3, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], 'g:' .. ARGV[i], tonumber(ARGV[i + 1])) end
redis.call('HSET', KEYS[1], 'v', version + 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return version + 1`

/** KEYS: ledger hashes. ARGV: ttlMs. Keeps ledgers that hold gives alive while they matter. Reply: 0. */
export const TOUCH = `for _, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ARGV[1]) end
return 0`

/** A READ_LEDGERS entry (HGETALL's list) as a ledger. */
export function parseLedger(reply: unknown): Ledger {
  if (!Array.isArray(reply) || reply.length === 0) return EMPTY_LEDGER
  let version = 0
  const given = new Map<string, number>()
  for (let i = 0; i + 1 < reply.length; i += 2) {
    const field = String(reply[i])
    const value = Number(reply[i + 1])
    if (field === 'v') version = value
    else if (field.startsWith('g:')) given.set(field.slice(2), value)
  }
  return { version, given }
}

export interface DemandEntry {
  readonly policy: GlobalPolicy
  readonly key: string
  readonly units: number
}

/** A READ_DEMAND reply as entries; malformed ones are skipped. */
export function parseDemand(reply: unknown): DemandEntry[] {
  const out: DemandEntry[] = []
  if (!Array.isArray(reply)) return out
  for (let i = 0; i + 1 < reply.length; i += 2) {
    const parts = String(reply[i]).split('\n')
    if (parts.length < 5) continue
    const [, id, limit, windowMs] = parts
    const policy = { id: id!, limit: Number(limit), windowMs: Number(windowMs) }
    if (!(policy.limit > 0 && policy.windowMs > 0)) continue
    out.push({ policy, key: parts.slice(4).join('\n'), units: Number(reply[i + 1]) })
  }
  return out
}
