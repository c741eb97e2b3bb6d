// What Envoy (or whoever reaches the gRPC listener) can send, against the real service and its
// gRPC listener: wildcard values that would make a backtracking matcher take seconds, the same
// descriptor more than once in a request, and a seeded fuzz of every request field. Every answer is
// a decision or a client status; none is INTERNAL, and nothing is logged as an internal error.
import { Writable } from 'node:stream'
import { status } from '@grpc/grpc-js'
import { pino } from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { parseEnvoyConfig } from '../../packages/sluice-server/src/envoy/config.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import type { Service } from '../../packages/sluice-server/src/server/service.js'
import { createService } from '../../packages/sluice-server/src/server/service.js'
import type { RlsClient, RlsRequest } from '../helpers/envoy.js'
import { d, rlsClient } from '../helpers/envoy.js'

interface Started {
  service: Service
  client: RlsClient
  url: string
  logs: string[]
}

const running: Started[] = []
afterEach(async () => {
  for (const r of running.splice(0)) {
    r.client.close()
    await r.service.close(500)
  }
})

/** The service with these Envoy rules and sluice.yaml extras, logging at info into `logs`. */
async function start(rules: string, extraYaml = ''): Promise<Started> {
  const logs: string[] = []
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logs.push(chunk.toString())
      done()
    },
  })
  const service = createService({
    config: parseConfig(
      `policies:\n  api: { algorithm: fixed-window, limit: 10, window: 1m }\n${extraYaml}`,
      'test.yaml',
    ),
    logger: pino({ level: 'info' }, sink),
    envoy: parseEnvoyConfig([{ file: 'rules.yaml', text: rules }]),
    grpc: { port: 0 },
  })
  const { url } = await service.listen(0)
  const started = { service, client: rlsClient(service.grpcAddress!.url), url, logs }
  running.push(started)
  return started
}

/** A reference glob matcher (`*` is any text, all else literal) by dynamic programming: O(n·m). */
function globMatches(pattern: string, value: string): boolean {
  let row = new Array<boolean>(value.length + 1).fill(false)
  row[0] = true
  for (const p of pattern) {
    const next = new Array<boolean>(value.length + 1).fill(false)
    if (p === '*') {
      let any = false
      for (let j = 0; j <= value.length; j++) {
        any ||= row[j]!
        next[j] = any
      }
    } else for (let j = 1; j <= value.length; j++) next[j] = row[j - 1]! && value[j - 1] === p
    row = next
  }
  return row[value.length]!
}

describe('wildcard values match in linear time', () => {
  const PATTERNS = ['a*b*c*d', 'a*b*c*d*e', 'x*', '*y', 'p*q*p', 'ab*ab*ab']
  const rules = `domain: w\ndescriptors:\n${PATTERNS.map(
    (p, i) =>
      `  - key: k\n    value: '${p}'\n    rate_limit: { unit: hour, requests_per_unit: 1000, name: p${i} }\n`,
  ).join('')}`

  /** The name of the limit Sluice matched, or undefined for none. */
  const matched = async (client: RlsClient, value: string) =>
    (await client.shouldRateLimit({ domain: 'w', descriptors: [d(['k', value])] })).statuses[0]!.current_limit
      ?.name

  it('matches adversarial 1 KB values as a glob does (first pattern in file order wins)', async () => {
    const { client } = await start(rules)
    const values = [
      `a${'bc'.repeat(511)}`, // a*b*c*d without the final d: every split tried by a backtracker
      `a${'bcd'.repeat(340)}e`,
      `a${'bcd'.repeat(340)}`,
      `a${'b'.repeat(500)}${'c'.repeat(500)}d`,
      `a${'b'.repeat(340)}${'c'.repeat(340)}${'x'.repeat(343)}`,
      `a${'b'.repeat(200)}${'c'.repeat(200)}${'d'.repeat(200)}${'x'.repeat(100)}`,
      `${'x'.repeat(1023)}y`,
      `${'p'.repeat(1023)}`,
      `p${'q'.repeat(1000)}p`,
      `${'ab'.repeat(511)}`,
      `${'ab'.repeat(511)}c`,
      'abcd',
      'ad',
      'abd',
    ]
    for (const value of values) {
      expect(Buffer.byteLength(value)).toBeLessThanOrEqual(1024)
      const expected = PATTERNS.findIndex((p) => globMatches(p, value))
      expect(await matched(client, value), value.slice(0, 40)).toBe(expected < 0 ? undefined : `p${expected}`)
    }
  })

  it('answers 16 concurrent 1 KB values against a*b*c*d*e, and /healthz while they run', async () => {
    const { client, url } = await start(
      "domain: w\ndescriptors:\n  - key: k\n    value: 'a*b*c*d*e'\n    rate_limit: { unit: hour, requests_per_unit: 9 }\n",
    )
    // A backtracking matcher tries every (b, c, d) split: about 255^3 of them, each scanned for an e.
    const value = `a${'b'.repeat(255)}${'c'.repeat(255)}${'d'.repeat(255)}${'x'.repeat(258)}`
    expect(Buffer.byteLength(value)).toBe(1024)
    const calls = Array.from({ length: 16 }, () =>
      client.shouldRateLimit({ domain: 'w', descriptors: [d(['k', value])] }),
    )
    const health = fetch(`${url}/healthz`).then((r) => r.status)
    const answers = await Promise.all(calls)
    expect(await health).toBe(200)
    for (const answer of answers) {
      expect(answer.overall_code).toBe('OK')
      expect(answer.statuses[0]!.current_limit).toBeNull()
    }
    // And the value that does end in e matches.
    const matching = await client.shouldRateLimit({
      domain: 'w',
      descriptors: [d(['k', `${value.slice(0, -1)}e`])],
    })
    expect(matching.statuses[0]!.current_limit?.requests_per_unit).toBe(9)
  }, 20_000)

  it('refuses a value over 1 KB as a client error', async () => {
    const { client } = await start(rules)
    const error = await client.refused({ domain: 'w', descriptors: [d(['k', `a${'b'.repeat(1024)}`])] })
    expect(error.code).toBe(status.INVALID_ARGUMENT)
    expect(error.details).toMatch(/value is over 1024 bytes/)
  })
})

describe('the same descriptor more than once in a request', () => {
  const rules =
    'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n'
  const once = (user: string): RlsRequest => ({ domain: 'd', descriptors: [d(['user', user])] })
  const twice = (user: string): RlsRequest => ({
    domain: 'd',
    descriptors: [d(['user', user]), d(['user', user])],
  })

  for (const charge of ['all-or-nothing', 'every'] as const) {
    it(`stays OVER_LIMIT when a key over its limit is sent twice (charge: ${charge})`, async () => {
      const { client, logs } = await start(rules, `envoy: { config: rules.yaml, charge: ${charge} }\n`)
      for (let i = 0; i < 5; i++) expect((await client.shouldRateLimit(once('u1'))).overall_code).toBe('OK')
      expect((await client.shouldRateLimit(once('u1'))).overall_code).toBe('OVER_LIMIT')
      const answer = await client.shouldRateLimit(twice('u1'))
      expect(answer.overall_code).toBe('OVER_LIMIT')
      expect(answer.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OVER_LIMIT'])
      expect(logs.join('')).not.toMatch(/internal error/)
    })
  }

  it('counts each occurrence (all-or-nothing: one check of the summed cost, every occurrence answered alike)', async () => {
    const { client } = await start(rules)
    const first = await client.shouldRateLimit(twice('u2'))
    expect(first.overall_code).toBe('OK')
    expect(first.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ['OK', 3],
      ['OK', 3],
    ])
    expect((await client.shouldRateLimit(twice('u2'))).statuses.map((s) => s.limit_remaining)).toEqual([1, 1])
    // Two more do not fit in the one left: the request is refused and nothing is charged.
    const over = await client.shouldRateLimit(twice('u2'))
    expect(over.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OVER_LIMIT'])
    expect((await client.shouldRateLimit(once('u2'))).statuses[0]).toMatchObject({
      code: 'OK',
      limit_remaining: 0,
    })
  })

  it('counts each occurrence on its own with charge: every, as envoyproxy/ratelimit does', async () => {
    const { client } = await start(rules, 'envoy: { config: rules.yaml, charge: every }\n')
    expect((await client.shouldRateLimit(twice('u3'))).statuses.map((s) => s.code)).toEqual(['OK', 'OK'])
    expect((await client.shouldRateLimit(twice('u3'))).statuses.map((s) => s.code)).toEqual(['OK', 'OK'])
    const third = await client.shouldRateLimit(twice('u3'))
    expect(third.statuses.map((s) => s.code)).toEqual(['OK', 'OVER_LIMIT'])
    expect(third.overall_code).toBe('OVER_LIMIT')
  })

  it('sums the occurrences of one shared counter (share_threshold) and of one override', async () => {
    const { client } = await start(
      'domain: s\ndescriptors:\n  - key: path\n    value: /api/*\n    share_threshold: true\n    rate_limit: { unit: hour, requests_per_unit: 3 }\n',
    )
    const shared = await client.shouldRateLimit({
      domain: 's',
      descriptors: [d(['path', '/api/a']), d(['path', '/api/b']), d(['path', '/api/c'])],
    })
    expect(shared.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ['OK', 0],
      ['OK', 0],
      ['OK', 0],
    ])
    const override = { ...d(['path', '/api/z']), limit: { requests_per_unit: 4, unit: 'HOUR' } }
    const overridden = await client.shouldRateLimit({ domain: 's', descriptors: [override, override] })
    expect(overridden.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ['OK', 2],
      ['OK', 2],
    ])
  })

  it('charges one counter once per occurrence when two per-request limits of one unit name it', async () => {
    const { client } = await start(rules)
    const limited = (n: number) => ({ ...d(['user', 'u5']), limit: { requests_per_unit: n, unit: 'HOUR' } })
    const both = await client.shouldRateLimit({ domain: 'd', descriptors: [limited(4), limited(3)] })
    // One step of cost 2 under the stricter limit (3): 1 left, for both.
    expect(both.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ['OK', 1],
      ['OK', 1],
    ])
    const again = await client.shouldRateLimit({ domain: 'd', descriptors: [limited(4), limited(3)] })
    expect(again.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OVER_LIMIT'])
    expect(
      (await client.shouldRateLimit({ domain: 'd', descriptors: [limited(4)] })).statuses[0],
    ).toMatchObject({
      code: 'OK',
      limit_remaining: 1,
    })
  })

  it('answers OVER_LIMIT, charging nothing, when the occurrences together exceed what the limit can ever admit', async () => {
    const { client } = await start(rules)
    const six = { domain: 'd', descriptors: Array.from({ length: 6 }, () => d(['user', 'u4'])) }
    const answer = await client.shouldRateLimit(six)
    expect(answer.overall_code).toBe('OVER_LIMIT')
    expect(answer.statuses.every((s) => s.code === 'OVER_LIMIT')).toBe(true)
    expect((await client.shouldRateLimit(once('u4'))).statuses[0]!.limit_remaining).toBe(4)
  })
})

describe('a descriptor that is always over (a ban)', () => {
  const rules =
    'domain: b\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n' +
    '  - key: country\n    value: XX\n    rate_limit: { unit: hour, requests_per_unit: 0 }\n'
  const banned = (user: string): RlsRequest => ({
    domain: 'b',
    descriptors: [d(['user', user]), d(['country', 'XX'])],
  })
  const alone = (user: string): RlsRequest => ({ domain: 'b', descriptors: [d(['user', user])] })

  it("charges none of the request's other descriptors when all-or-nothing", async () => {
    const { client } = await start(rules)
    for (let i = 0; i < 3; i++) {
      const answer = await client.shouldRateLimit(banned('b1'))
      expect(answer.overall_code).toBe('OVER_LIMIT')
      expect(answer.statuses.map((s) => s.code)).toEqual(['OK', 'OVER_LIMIT'])
      expect(answer.statuses[0]!.limit_remaining).toBe(5)
    }
    expect((await client.shouldRateLimit(alone('b1'))).statuses[0]!.limit_remaining).toBe(4)
  })

  it('charges the others with charge: every, as envoyproxy/ratelimit does', async () => {
    const { client } = await start(rules, 'envoy: { config: rules.yaml, charge: every }\n')
    await client.shouldRateLimit(banned('b2'))
    await client.shouldRateLimit(banned('b2'))
    expect((await client.shouldRateLimit(alone('b2'))).statuses[0]!.limit_remaining).toBe(2)
  })
})

/** mulberry32: a small seeded generator, so every run sends the same requests. */
function seeded(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

describe('no request shape answers INTERNAL (seeded fuzz through the real listener)', () => {
  const rules = [
    'domain: d',
    'descriptors:',
    '  - key: user',
    '    rate_limit: { unit: minute, requests_per_unit: 3 }',
    '  - key: plan',
    '    value: pro',
    '    descriptors:',
    '      - key: user',
    '        rate_limit: { algorithm: token-bucket, unit: second, requests_per_unit: 5, burst: 8 }',
    '  - key: path',
    "    value: '/a*b*'",
    '    share_threshold: true',
    '    rate_limit: { unit: hour, requests_per_unit: 2 }',
    '  - key: banned',
    '    rate_limit: { unit: second, requests_per_unit: 0 }',
    '  - key: free',
    '    rate_limit: { unlimited: true }',
    '  - key: api_key',
    '    shadow_mode: true',
    '    rate_limit: { algorithm: sliding-window-log, unit: minute, requests_per_unit: 2 }',
    '',
  ].join('\n')

  const ALLOWED = new Set<number>([
    status.INVALID_ARGUMENT,
    status.NOT_FOUND,
    status.RESOURCE_EXHAUSTED,
    status.OUT_OF_RANGE,
  ])

  function generator(random: () => number) {
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!
    const int = (max: number) => Math.floor(random() * (max + 1))
    // Mostly well-formed fields, so that many requests get as far as a decision; the rest odd.
    const usually = <T>(share: number, common: readonly T[], odd: readonly (() => T)[]): T =>
      random() < share ? pick(common) : pick(odd)()
    const value = () =>
      usually(
        0.85,
        ['u1', 'u2', 'pro', '/a/b/c', '/axbyz'],
        [
          () => '',
          () => `/a${'b'.repeat(int(1100))}`,
          () => 'ünïcødé 🚦',
          () => 'nul\u0000byte',
          () => '\ud800', // a lone surrogate
          () => 'x'.repeat(int(300)),
          () => String(int(1e9)),
          () => '*',
        ],
      )
    const key = () =>
      usually(
        0.9,
        ['user', 'plan', 'path', 'banned', 'free', 'api_key'],
        [() => 'nope', () => '', () => 'k'.repeat(300), () => 'ключ', () => 'k\u0000'],
      )
    const descriptor = () => {
      const count = usually(0.9, [1, 1, 2, 3], [() => 0, () => 16, () => 17])
      const out: RlsRequest['descriptors'][number] = {
        entries: Array.from({ length: count }, () => ({ key: key(), value: value() })),
      }
      if (random() < 0.15)
        out.limit = {
          requests_per_unit: pick([0, 1, 2, 7, 1000, 4_294_967_295]),
          unit: pick([
            'SECOND',
            'MINUTE',
            'HOUR',
            'DAY',
            'MONTH',
            'YEAR',
            'UNKNOWN',
            99 as unknown as string,
          ]),
        }
      return out
    }
    return (): RlsRequest => {
      const count = usually(0.9, [1, 1, 2, 3, 5], [() => 0, () => 64, () => 65])
      const descriptors = Array.from({ length: count }, descriptor)
      // Duplicates: the same descriptor object again, and an identical copy.
      if (count > 0 && random() < 0.3) descriptors.push(descriptors[0]!, structuredClone(descriptors[0]!))
      return {
        domain: usually(
          0.9,
          ['d'],
          [() => '', () => 'other', () => 'd'.repeat(300), () => 'dömäin', () => 'd\u0000'],
        ),
        descriptors,
        hits_addend: usually(
          0.85,
          [0, 1, 2],
          [() => 5, () => 9, () => 1_000_000, () => 1_000_001, () => 4_294_967_295],
        ),
      }
    }
  }

  for (const charge of ['all-or-nothing', 'every'] as const) {
    it(`answers 400 generated requests with a decision or a client status (charge: ${charge})`, async () => {
      const { client, logs } = await start(rules, `envoy: { config: rules.yaml, charge: ${charge} }\n`)
      const next = generator(seeded(charge === 'every' ? 7 : 32))
      const seen = new Map<string, number>()
      for (let i = 0; i < 400; i++) {
        const request = next()
        const outcome = await client.shouldRateLimit(request).then(
          (r) => r.overall_code,
          (e: { code: number; details: string }) => {
            if (!ALLOWED.has(e.code))
              throw new Error(
                `request ${i} answered ${e.code} (${e.details}): ${JSON.stringify(request).slice(0, 400)}`,
              )
            return `status ${e.code}`
          },
        )
        if (outcome !== 'OK' && outcome !== 'OVER_LIMIT' && !outcome.startsWith('status '))
          throw new Error(`request ${i} answered ${outcome}`)
        seen.set(outcome, (seen.get(outcome) ?? 0) + 1)
      }
      // The generator reaches decisions of both kinds and refusals, not only one of them.
      expect(seen.get('OK')).toBeGreaterThan(0)
      expect(seen.get('OVER_LIMIT')).toBeGreaterThan(0)
      expect(seen.get(`status ${status.INVALID_ARGUMENT}`)).toBeGreaterThan(0)
      expect(logs.join('')).not.toMatch(/internal error/)
    }, 60_000)
  }
})
