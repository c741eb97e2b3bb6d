// Store calls per admitted waiter under contention (goal: at most 2 on average). A real
// redis-server; "processes" are separate limiters (each its own per-key queue, as separate OS
// processes would have), all waiting on one hot key. Calls are counted by Redis itself (INFO
// commandstats: EVALSHA + EVAL), with coalescing off so one decision is one script call. Beside it,
// the naive loop every waiter runs on its own (consume, sleep retryAfterMs, again).
import { Redis } from 'ioredis'
import { createLimiter } from '../../packages/sluice/dist/index.js'
import { redisStore } from '../../packages/sluice/dist/redis.js'
import { startRedis } from '../../test/helpers/redis-harness.js'
import type { BenchCase, BenchRow } from '../types.js'

async function scriptCalls(client: Redis): Promise<number> {
  const info = await client.info('commandstats')
  let calls = 0
  for (const match of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(match[1])
  return calls
}

interface Shape {
  processes: number
  waitersEach: number
  naive: boolean
}

async function run(
  port: number,
  shape: Shape,
  round: number,
): Promise<{ calls: number; admitted: number; ms: number }> {
  const counter = new Redis(port, '127.0.0.1')
  const clients = Array.from({ length: shape.processes }, () => new Redis(port, '127.0.0.1'))
  const limiters = clients.map((client) =>
    createLimiter({
      store: redisStore(client, { prefix: `bench-wait-${round}`, coalesce: false }),
      storeTimeout: 2_000,
      // 200 per second, a burst of 5: 4 x 25 waiters need about half a second.
      policies: { hot: { algorithm: 'token-bucket', limit: 200, window: '1s', burst: 5 } },
    }),
  )
  await Promise.all(clients.map((c) => c.ping()))
  const before = await scriptCalls(counter)
  const started = performance.now()
  let admitted = 0
  await Promise.all(
    limiters.flatMap((limiter) =>
      Array.from({ length: shape.waitersEach }, async () => {
        if (!shape.naive) {
          if ((await limiter.wait('hot', 'key', { maxWaitMs: 10_000 })).allowed) admitted++
          return
        }
        for (;;) {
          const d = await limiter.consume('hot', 'key')
          if (d.allowed) {
            admitted++
            return
          }
          await new Promise((r) => setTimeout(r, d.retryAfterMs))
        }
      }),
    ),
  )
  const ms = performance.now() - started
  const calls = (await scriptCalls(counter)) - before
  for (const c of [counter, ...clients]) c.disconnect()
  return { calls, admitted, ms }
}

export const benchCase: BenchCase = {
  name: 'waiting',
  async run({ quick }) {
    const server = await startRedis()
    const rows: BenchRow[] = []
    try {
      const shapes: [string, Shape][] = [
        ['wait, 1 process x 100 waiters', { processes: 1, waitersEach: 100, naive: false }],
        ['wait, 4 processes x 25 waiters', { processes: 4, waitersEach: 25, naive: false }],
        ['naive loop (consume, sleep retryAfterMs), 4 x 25', { processes: 4, waitersEach: 25, naive: true }],
      ]
      const rounds = quick ? 1 : 3
      let round = 0
      for (const [subject, shape] of shapes) {
        let calls = 0
        let admitted = 0
        let ms = 0
        for (let i = 0; i < rounds; i++) {
          const r = await run(server.port, shape, round++)
          calls += r.calls
          admitted += r.admitted
          ms += r.ms
        }
        rows.push({
          subject,
          metric: 'store calls per admitted waiter',
          value: calls / admitted,
          unit: 'calls',
          note: `${admitted} admitted in ${rounds} round(s), ${(ms / rounds).toFixed(0)} ms a round; goal <= 2`,
        })
      }
    } finally {
      await server.stop()
    }
    return rows
  },
}
