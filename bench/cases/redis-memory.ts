// Redis memory per tracked key: one decision on each of 10,000 distinct keys at the peers' 100 per
// 60 s, and `used_memory` after the writes minus before, over 10,000 (FLUSHALL between subjects; the
// median of 3 repeats); then the same with a second decision on each key a few ms after its first,
// the state a key read back holds. Subjects: Sluice's four counting algorithms (redisStore +
// createLimiter) on the Redis clock; the same on the client clock, whose value layouts are the ones
// every clock wrote before the compact layout (the before, in the same run); rate-limiter-flexible's
// RateLimiterRedis and express-rate-limit's rate-limit-redis store. All with rate-limiter-flexible's
// default prefix before the subject (`rlflx:{user-00001}:api`, `rlflx:user-00001`), against one
// redis-server started here on a free port. Sizes move in steps of the allocator's size classes
// (16 B here): a key's length decides its step (docs/stores.md). Each row's note shows one sample
// key: its value, `OBJECT ENCODING` and `MEMORY USAGE`.
//   npm run bench -- --only redis-memory
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { RedisStore as RateLimitRedisStore } from 'rate-limit-redis'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createLimiter } from '../../packages/sluice/dist/index.js'
import { redisStore } from '../../packages/sluice/dist/redis.js'
import { startRedis } from '../../test/helpers/redis-harness.js'
import { median } from '../load.js'
import type { BenchCase, BenchRow } from '../types.js'

const KEYS = 10_000
const REPEATS = 3
const subjects = Array.from({ length: KEYS }, (_, i) => `user-${String(i).padStart(5, '0')}`)
const COUNTING = ['fixed-window', 'sliding-window-counter', 'token-bucket', 'gcra'] as const

interface Subject {
  id: string
  name: string
  /** The Redis key holding `subject`'s state, to inspect. */
  keyOf(subject: string): string
  decide(subject: string): Promise<unknown>
}

/**
 * used_memory less what the connections hold (mem_clients_normal): a connection's query and reply
 * buffers grow with the largest call it carried and shrink later, on the server's timer, which would
 * put a few KB of noise between subjects that write the same keys.
 */
async function usedMemory(client: Redis): Promise<number> {
  const text = await client.info('memory')
  const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(text)![1])
  return field('used_memory') - field('mem_clients_normal')
}

/**
 * One decision on every subject, 100 at a time, or two (`twice`): each batch decided again 2 ms
 * after its first answers, so every key is read back long before a key of one unit at 100 per
 * minute (600 ms) could expire, however slow the machine, and a token bucket has refilled by a
 * part of a token: the state a busy key holds, where after one decision its level is whole.
 */
async function decideEach(subject: Subject, twice: boolean): Promise<void> {
  for (let i = 0; i < KEYS; i += 100) {
    const batch = subjects.slice(i, i + 100)
    await Promise.all(batch.map((s) => subject.decide(s)))
    if (twice) {
      await sleep(2)
      await Promise.all(batch.map((s) => subject.decide(s)))
    }
  }
}

/** Bytes per key of one subject: used_memory delta over KEYS keys after `decideEach`. */
async function bytesPerKey(client: Redis, subject: Subject, twice: boolean): Promise<number> {
  await client.flushall()
  // Loads the subject's scripts (their cache is part of used_memory) before the first reading.
  await subject.decide('warm-up')
  await client.del(subject.keyOf('warm-up'))
  await sleep(300)
  const before = await usedMemory(client)
  await decideEach(subject, twice)
  // The main and expires tables grow at 8,192 keys and are rehashed a step per command, the rest by
  // the server's cron: read once both are done, so no subject is measured holding two tables.
  await sleep(300)
  const after = await usedMemory(client)
  if ((await client.dbsize()) !== KEYS) throw new Error(`${subject.id} did not write one key per subject`)
  return (after - before) / KEYS
}

/** How Redis holds one sample key: its MEMORY USAGE, encoding and value. */
async function anatomy(client: Redis, subject: Subject, twice: boolean): Promise<string> {
  await client.flushall()
  await subject.decide(subjects[1]!)
  if (twice) {
    // A part of a token later: 100 per minute refills one in 600 ms.
    await sleep(7)
    await subject.decide(subjects[1]!)
  }
  const key = subject.keyOf(subjects[1]!)
  const usage = await client.memory('USAGE', key)
  const encoding = await client.object('ENCODING', key)
  const value = await client.get(key)
  return `${key} = ${value} (${encoding}, MEMORY USAGE ${usage} B)`
}

export const benchCase: BenchCase = {
  name: 'redis-memory',
  async run() {
    // DEBUG SET-ACTIVE-EXPIRE 0: a token bucket's or GCRA's key of one unit at 100 per minute lives
    // 600 ms, less than 10,000 writes may take on a loaded machine. Without active expiry a key stays
    // in memory until it is read, so every subject is measured holding all its keys. No slow log: a
    // call slower than 10 ms (a loaded machine, a coalesced call) would keep its arguments there.
    const server = await startRedis(['--enable-debug-command', 'local', '--slowlog-log-slower-than', '-1'])
    const client = new Redis(server.port, '127.0.0.1')
    try {
      await client.call('DEBUG', 'SET-ACTIVE-EXPIRE', '0')
      // Each algorithm on the Redis clock (the default: compact values), and on the client clock,
      // whose values carry their own times (the value layouts, what every clock wrote before).
      const all: Subject[] = (['server', 'client'] as const).flatMap((clock) =>
        COUNTING.map((algorithm): Subject => {
          const limiter = createLimiter({
            store: redisStore(client, { prefix: 'rlflx', clock }),
            policies: { api: { algorithm, limit: 100, window: '1m' } },
            storeTimeout: '60s',
          })
          return {
            id: clock === 'server' ? `sluice-${algorithm}` : `sluice-${algorithm} client-clock`,
            name:
              clock === 'server'
                ? `sluice ${algorithm}`
                : `sluice ${algorithm} (clock: 'client', value layout)`,
            keyOf: (s) => `rlflx:{${s}}:api`,
            decide: async (s) => {
              const decision = await limiter.consume('api', s)
              if (decision.degraded === true) throw new Error('a decision was not Redis’s')
            },
          }
        }),
      )
      const rlf = new RateLimiterRedis({ storeClient: client, points: 100, duration: 60, keyPrefix: 'rlflx' })
      all.push({
        id: 'rate-limiter-flexible',
        name: 'rate-limiter-flexible RateLimiterRedis',
        keyOf: (s) => `rlflx:${s}`,
        decide: (s) => rlf.consume(s),
      })
      const erl = new RateLimitRedisStore({
        sendCommand: (command: string, ...args: string[]) => client.call(command, ...args) as never,
        prefix: 'rlflx:',
      })
      erl.init({ windowMs: 60_000 } as never)
      all.push({
        id: 'rate-limit-redis',
        name: 'express-rate-limit rate-limit-redis',
        keyOf: (s) => `rlflx:${s}`,
        decide: (s) => erl.increment(s),
      })

      const rows: BenchRow[] = []
      for (const twice of [false, true]) {
        const bytes = new Map<Subject, number[]>(all.map((s) => [s, []]))
        for (let repeat = 0; repeat < REPEATS; repeat++) {
          for (let i = 0; i < all.length; i++) {
            const subject = all[(i + repeat) % all.length]!
            bytes.get(subject)!.push(await bytesPerKey(client, subject, twice))
          }
        }
        const reference = median(bytes.get(all.find((s) => s.id === 'rate-limiter-flexible')!)!)
        for (const subject of all) {
          const value = median(bytes.get(subject)!)
          rows.push({
            ...(subject.id.endsWith('client-clock')
              ? {}
              : { id: `redis-memory/${subject.id} bytes-per-key${twice ? ' twice' : ''}` }),
            subject: subject.name,
            metric: `bytes/key (used_memory delta), ${twice ? 'two decisions' : 'one decision'} per key`,
            value,
            unit: 'B',
            ratio: value / reference,
            note: `${value.toFixed(2)} B, x RLF, median of ${REPEATS}; ${await anatomy(client, subject, twice)}`,
          })
        }
      }
      await client.flushall()
      return rows
    } finally {
      client.disconnect()
      await server.stop()
    }
  },
}
