// Node.js CPU per decision on the client side of a Redis-backed decision, layer by layer, at 64 in
// flight with one decision per script call: a bare ioredis EVALSHA of the minimal token-bucket
// script, a bare EVALSHA of Sluice's flat token-bucket script with Sluice's arguments (both also
// through the store's write coalescing, which the store uses by default), the Redis store's apply,
// and limiter.consume (failover and local deny cache included). 5 interleaved rounds of 0.6 s,
// medians. Shows what Sluice's own JavaScript costs per decision.
// Run: npm run build && node --import tsx bench/redis-client-cost.ts
import { Redis } from 'ioredis'
// The store and limiter come from the build (dist/), as users run them: tsx's keepNames would add a
// defineProperty per closure created per decision. adaptClient creates none per call.
import { createLimiter } from '../packages/sluice/dist/index.js'
import { resolvePolicy } from '../packages/sluice/dist/internal.js'
import { redisStore } from '../packages/sluice/dist/redis.js'
import { adaptClient } from '../packages/sluice/src/stores/redis/client.js'
// The scripts of main 0a55701 (their wire format): bench/lua-cost.ts measures today's next to them.
import { luaSources } from '../packages/sluice/src/stores/redis/lua.generated.js'
import { startRedis } from '../test/helpers/redis-harness.js'
import { MINIMAL_TOKEN_BUCKET } from './reference-scripts.js'

const IN_FLIGHT = 64
const ROUNDS = 5
const server = await startRedis()
const client = new Redis(server.port, '127.0.0.1')
try {
  const minimal = (await client.script('LOAD', MINIMAL_TOKEN_BUCKET)) as string
  const flat = (await client.script('LOAD', luaSources['apply/token-bucket'])) as string
  const policy = { algorithm: 'token-bucket', limit: 1_000_000, window: '1h' } as const
  const resolved = resolvePolicy('tb', policy)
  const store = redisStore(client, { coalesce: false })
  // What the store calls: EVALSHA through its write coalescing (the store's default).
  const adapter = adaptClient(client)!
  const limiter = createLimiter({
    store: redisStore(client, { coalesce: false }),
    policies: { tb: policy },
    storeTimeout: '60s',
  })
  const subjects: [string, (key: string) => Promise<unknown>][] = [
    [
      'bare EVALSHA, minimal script',
      (k) => client.evalsha(minimal, 1, `m:{${k}}`, '1000000', '3600000', '1000000'),
    ],
    [
      "bare EVALSHA, flat script with Sluice's arguments",
      (k) =>
        client.evalsha(
          flat,
          2,
          `f:{${k}}:tb`,
          `f:{${k}}:tb:block`,
          '',
          '1',
          '1000000',
          '3600000',
          '1000000',
          '1',
        ),
    ],
    [
      'bare EVALSHA, minimal script, shared writes',
      (k) => adapter.evalsha(minimal, [`m:{${k}}`], ['1000000', '3600000', '1000000'], true),
    ],
    [
      "bare EVALSHA, flat script with Sluice's arguments, shared writes",
      (k) =>
        adapter.evalsha(
          flat,
          [`f:{${k}}:tb`, `f:{${k}}:tb:block`],
          ['', '1', '1000000', '3600000', '1000000', '1'],
          true,
        ),
    ],
    ['store.apply (coalesce: false)', (k) => store.apply([{ policy: resolved, key: k, cost: 1 }], 'consume')],
    ['limiter.consume (coalesce: false)', (k) => limiter.consume('tb', k)],
  ]
  const cpu = new Map<string, number[]>()
  const rate = new Map<string, number[]>()
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, decide] of subjects) {
      let i = 0
      let n = 0
      const lane = async (until: number) => {
        while (performance.now() < until) {
          await decide(`u${i++ % 10_000}`)
          n++
        }
      }
      const before = process.cpuUsage()
      const started = performance.now()
      await Promise.all(Array.from({ length: IN_FLIGHT }, () => lane(started + 600)))
      const used = process.cpuUsage(before)
      cpu.set(name, [...(cpu.get(name) ?? []), (used.user + used.system) / n])
      rate.set(name, [...(rate.get(name) ?? []), (n / (performance.now() - started)) * 1000])
      await client.flushall()
    }
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!
  console.log('| subject | Node CPU per decision | decisions/s |')
  console.log('| --- | ---: | ---: |')
  for (const [name] of subjects) {
    console.log(
      `| ${name} | ${median(cpu.get(name)!).toFixed(1)} µs | ${Math.round(median(rate.get(name)!))} |`,
    )
  }
} finally {
  client.disconnect()
  await server.stop()
}
