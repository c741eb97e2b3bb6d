// Who picks a key's Cluster slot: on the real Cluster of the harness, subjects chosen to share one
// CRC16 slot all land on one master when the subject is the hash tag, and spread over the masters
// when the tag is derived with a secret; every key of one subject still shares one slot (a layered
// decision is one script call); the secret kept in Redis is shared, written back and adopted; keys
// of the subject layout start over once, as docs/stores.md says.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Policy, resolvePolicy } from '../../../packages/sluice/src/policy.js'
import type { Step } from '../../../packages/sluice/src/store.js'
import { type RedisStore, redisStore } from '../../../packages/sluice/src/stores/redis/index.js'
import { keyedLayout, slotSecretKey, stepKeys } from '../../../packages/sluice/src/stores/redis/keys.js'
import { freshPrefix, ioredis, ioredisCluster, nodeRedisCluster } from '../../helpers/redis-clients.js'

const cluster = ioredisCluster()
const standalone = ioredis()
afterAll(() => {
  cluster.disconnect()
  standalone.disconnect()
})

const policy = (name: string, p: Policy) => resolvePolicy(name, p)
const api = policy('api', { algorithm: 'fixed-window', limit: 2, window: '1h' })
const burst = policy('burst', { algorithm: 'token-bucket', limit: 5, window: '1m' })
const daily = policy('daily', { algorithm: 'sliding-window-log', limit: 100, window: '1d' })
const SECRET = 'a fixed secret for this test file'

/** CRC16/XMODEM, Redis Cluster's key hash. */
function crc16(text: string): number {
  let crc = 0
  for (const byte of Buffer.from(text, 'utf8')) {
    crc ^= byte << 8
    for (let bit = 0; bit < 8; bit++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc
}

/** The slot of a key: the CRC16 of its hash tag (the first non-empty `{...}`), else of the whole key. */
function keySlot(key: string): number {
  const open = key.indexOf('{')
  const close = open === -1 ? -1 : key.indexOf('}', open + 1)
  const hashed = close > open + 1 ? key.slice(open + 1, close) : key
  return crc16(hashed) % 16384
}

/** `count` subjects whose own CRC16 slot is the same: what a caller who knows Redis can choose. */
function collidingSubjects(count: number): string[] {
  const target = keySlot('{crowd-0}')
  const out: string[] = []
  for (let i = 0; out.length < count; i++) if (keySlot(`{crowd-${i}}`) === target) out.push(`crowd-${i}`)
  return out
}

/** Keys under `prefix` on each master (SCAN of each node): where they really are. */
async function keysPerMaster(prefix: string): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>()
  for (const node of cluster.nodes('master')) {
    const keys: string[] = []
    let cursor = '0'
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000)
      cursor = next
      keys.push(...batch)
    } while (cursor !== '0')
    out.set(`${node.options.host}:${node.options.port}`, keys)
  }
  return out
}

async function consumeEach(store: RedisStore, subjects: readonly string[]): Promise<void> {
  const results = await Promise.all(
    subjects.map((key) => store.apply([{ policy: api, key, cost: 1 }], 'consume')),
  )
  expect(results.every((r) => r[0]!.allowed)).toBe(true)
}

describe('the slot of a key', () => {
  const subjects = collidingSubjects(300)

  beforeAll(async () => {
    // The test's own CRC16 is Redis's: checked against CLUSTER KEYSLOT.
    const samples = [...subjects.slice(0, 3), 'plain', 'ключ-🔑']
    for (const s of samples) {
      for (const key of [`p:{${s}}:api`, `p:{x}:{${s}}:api`, s]) {
        expect(Number(await cluster.call('CLUSTER', 'KEYSLOT', key))).toBe(keySlot(key))
      }
    }
  })

  it('the subject as the tag (slotSecret: false): 300 chosen subjects all land on one master', async () => {
    const prefix = freshPrefix('slots-subject')
    await consumeEach(redisStore(cluster, { prefix, slotSecret: false }), subjects)
    const counts = [...(await keysPerMaster(prefix)).values()].map((k) => k.length).sort((a, b) => a - b)
    expect(counts).toEqual([0, 0, 300])
  })

  for (const [label, options] of [
    ['a configured secret', { slotSecret: SECRET }],
    ['the default (a secret kept in Redis)', {}],
  ] as const) {
    it(`${label}: the same 300 subjects spread over every master`, async () => {
      const prefix = freshPrefix('slots-keyed')
      await consumeEach(redisStore(cluster, { prefix, ...options }), subjects)
      const perMaster = await keysPerMaster(prefix)
      const counts = [...perMaster.values()].map(
        (keys) => keys.filter((k) => !k.endsWith(':slot-secret')).length,
      )
      expect(counts.reduce((a, b) => a + b)).toBe(300)
      // 100 each on average; a third master left out, or half on one, would be a chosen slot.
      for (const count of counts) {
        expect(count).toBeGreaterThan(50)
        expect(count).toBeLessThan(150)
      }
      // The names keep the subject readable: prefix:{tag}:{subject}:policy.
      const all = [...perMaster.values()].flat()
      const secret = 'slotSecret' in options ? options.slotSecret : await cluster.get(slotSecretKey(prefix))
      const layout = keyedLayout(prefix, secret!)
      expect(all).toContain(layout({ policy: api, key: subjects[0]!, cost: 1 }).state)
      const named = /^[^{]+:\{[A-Za-z0-9_-]{4}\}:\{crowd-\d+\}:api$/
      expect(all.filter((k) => !k.endsWith(':slot-secret') && !named.test(k))).toEqual([])
    })
  }

  it('every key of one subject shares a slot, and a layered decision on it is one script call', async () => {
    const prefix = freshPrefix('slots-layered')
    const store = redisStore(cluster, { prefix, slotSecret: SECRET })
    const layout = keyedLayout(prefix, SECRET)
    const steps: Step[] = [api, burst, daily].map((p) => ({ policy: p, key: 'user-42', cost: 1 }))
    const slots = new Set(steps.flatMap((s) => [layout(s).state, layout(s).block].map(keySlot)))
    expect(slots.size).toBe(1)

    await store.ready() // scripts loaded: no EVALSHA below meets NOSCRIPT and is sent twice
    // Every EVALSHA on every master carrying this prefix, as Redis saw it.
    const monitors = await Promise.all(cluster.nodes('master').map((node) => node.monitor()))
    const calls: string[][] = []
    for (const m of monitors)
      m.on('monitor', (_time: string, args: string[]) => {
        if (args[0]?.toLowerCase() === 'evalsha' && args.some((a) => a.startsWith(`${prefix}:`)))
          calls.push(args)
      })
    try {
      const first = await store.apply(steps, 'consume')
      const second = await store.apply(steps, 'consume')
      const third = await store.apply(steps, 'consume')
      expect([first, second, third].map((r) => r.every((x) => x.allowed))).toEqual([true, true, false])
      // The third decision is denied by `api` and charges nothing anywhere: all or nothing in one call.
      expect(third.map((r) => r.remaining)).toEqual([0, 3, 98])
      // MONITOR reports on its own connections: wait (bounded) until the three calls are seen.
      const deadline = Date.now() + 5000
      while (calls.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
      // Three, or more when another test file's SCRIPT FLUSH made one meet NOSCRIPT and go again;
      // each carries all 3 steps' keys (state and block): no decision was split across slots.
      expect(calls.length).toBeGreaterThanOrEqual(3)
      for (const args of calls) expect(args[2]).toBe('6')
    } finally {
      for (const m of monitors) m.disconnect()
    }
  })
})

describe('the secret kept in Redis', () => {
  it('is created once with no TTL, shared by every store and client library on the prefix', async () => {
    const prefix = freshPrefix('slots-shared')
    const viaIoredis = redisStore(cluster, { prefix })
    const viaNodeRedis = await nodeRedisCluster()
    try {
      const other = redisStore(viaNodeRedis, { prefix })
      await Promise.all([viaIoredis.ready(), other.ready()])
      const secret = await cluster.get(slotSecretKey(prefix))
      expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/)
      expect(await cluster.pttl(slotSecretKey(prefix))).toBe(-1)
      // One count: two decisions through one store, the third through the other is denied.
      const step = { policy: api, key: 'shared-user', cost: 1 }
      expect((await viaIoredis.apply([step], 'consume'))[0]!.allowed).toBe(true)
      expect((await other.apply([step], 'consume'))[0]!.allowed).toBe(true)
      expect((await viaIoredis.apply([step], 'consume'))[0]!.allowed).toBe(false)
      expect(await cluster.get(slotSecretKey(prefix))).toBe(secret)
    } finally {
      await viaNodeRedis.close()
    }
  })

  it('a store that has not read it yet reads it before its first decision', async () => {
    const prefix = freshPrefix('slots-first')
    const store = redisStore(cluster, { prefix })
    const step = { policy: api, key: 'first', cost: 1 }
    const [result] = await store.apply([step], 'consume')
    expect(result!.allowed).toBe(true)
    const secret = (await cluster.get(slotSecretKey(prefix)))!
    expect(await cluster.exists(keyedLayout(prefix, secret)(step).state)).toBe(1)
  })

  it('lost while processes run: ready() writes it back, and a process that made another adopts it', async () => {
    const prefix = freshPrefix('slots-lost')
    const step = { policy: api, key: 'survivor', cost: 1 }
    const running = redisStore(cluster, { prefix })
    expect((await running.apply([step], 'consume'))[0]!.allowed).toBe(true)
    const secret = await cluster.get(slotSecretKey(prefix))

    // Deleted: the next ready() (the service's readiness probe) writes the same secret back.
    await cluster.del(slotSecretKey(prefix))
    await running.ready()
    expect(await cluster.get(slotSecretKey(prefix))).toBe(secret)

    // Deleted, and a process started meanwhile made a new one: the running store adopts it at its
    // next ready(), so both count the subject in one place again.
    await cluster.del(slotSecretKey(prefix))
    const started = redisStore(cluster, { prefix })
    await started.ready()
    const made = await cluster.get(slotSecretKey(prefix))
    expect(made).not.toBe(secret)
    await running.ready()
    expect(await cluster.get(slotSecretKey(prefix))).toBe(made)
    expect((await started.apply([step], 'consume'))[0]!.allowed).toBe(true)
    expect((await running.apply([step], 'consume'))[0]!.allowed).toBe(true)
    expect((await started.apply([step], 'consume'))[0]!.allowed).toBe(false)
  })

  it('lost with the script cache (a restart that kept nothing): the next NOSCRIPT writes it back', async () => {
    const prefix = freshPrefix('slots-restart')
    const store = redisStore(cluster, { prefix })
    await store.ready()
    const secret = await cluster.get(slotSecretKey(prefix))
    await cluster.del(slotSecretKey(prefix))
    for (const node of cluster.nodes('master')) await node.script('FLUSH')
    expect((await store.apply([{ policy: api, key: 'k', cost: 1 }], 'consume'))[0]!.allowed).toBe(true)
    // The write-back runs beside the decision's retry: wait for it, a few round trips at most.
    const deadline = Date.now() + 5000
    while ((await cluster.get(slotSecretKey(prefix))) === null && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 10))
    expect(await cluster.get(slotSecretKey(prefix))).toBe(secret)
  })
})

describe('the layout by topology, and keys of the subject layout', () => {
  it('refuses a slot secret it cannot use, saying what to write', () => {
    for (const slotSecret of ['short', '', true, 42, null])
      expect(() => redisStore(cluster, { slotSecret } as never)).toThrow(
        expect.objectContaining({
          code: 'SLUICE_INVALID_OPTIONS',
          message: expect.stringContaining('at least 16'),
        }),
      )
  })

  it('standalone keeps the subject as the tag by default; a configured secret keys it there too', async () => {
    const prefix = freshPrefix('slots-standalone')
    const step = { policy: api, key: 'solo', cost: 1 }
    await redisStore(standalone, { prefix }).apply([step], 'consume')
    expect(await standalone.exists(stepKeys(prefix, step).state)).toBe(1)
    expect(await standalone.exists(slotSecretKey(prefix))).toBe(0)
    const keyedPrefix = freshPrefix('slots-standalone-keyed')
    await redisStore(standalone, { prefix: keyedPrefix, slotSecret: SECRET }).apply([step], 'consume')
    expect(await standalone.exists(keyedLayout(keyedPrefix, SECRET)(step).state)).toBe(1)
  })

  it('keys of the subject layout are not read by the keyed one: counts and blocks start over once, and the old keys expire within their window or block', async () => {
    const prefix = freshPrefix('slots-upgrade')
    const before = redisStore(cluster, { prefix, slotSecret: false })
    const spent = { policy: api, key: 'spent', cost: 1 }
    const blocked = { policy: burst, key: 'blocked', cost: 1 }
    await before.apply([spent], 'consume')
    await before.apply([spent], 'consume')
    expect((await before.apply([spent], 'consume'))[0]!.allowed).toBe(false)
    await before.block([blocked], 600_000)
    expect((await before.apply([blocked], 'consume'))[0]!.blocked).toBe(true)

    const after = redisStore(cluster, { prefix })
    expect((await after.apply([spent], 'consume'))[0]).toMatchObject({ allowed: true, remaining: 1 })
    expect((await after.apply([blocked], 'consume'))[0]).toMatchObject({ allowed: true, blocked: false })

    // The old keys are left alone and expire by themselves: the window (1 h), the block (10 min).
    const oldSpent = stepKeys(prefix, spent)
    const oldBlock = stepKeys(prefix, blocked).block
    expect(await cluster.pttl(oldSpent.state)).toBeGreaterThan(0)
    expect(await cluster.pttl(oldSpent.state)).toBeLessThanOrEqual(3_600_000)
    expect(await cluster.pttl(oldBlock)).toBeGreaterThan(0)
    expect(await cluster.pttl(oldBlock)).toBeLessThanOrEqual(600_000)
    // A store that keeps the subject layout still reads them.
    expect((await before.apply([spent], 'consume'))[0]!.allowed).toBe(false)
    expect((await before.apply([blocked], 'consume'))[0]!.blocked).toBe(true)
  })
})
