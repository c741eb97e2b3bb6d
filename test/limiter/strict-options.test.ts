// Every options object is checked strictly, once, in JavaScript too: an unknown or misspelled key is
// a SluiceError naming the key and the option meant, never a silently applied default. The objects
// are plain JavaScript (cast through unknown), the way an untyped caller passes them.
import Fastify from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { sluice as sluiceExpress } from '../../packages/sluice/src/adapters/express.js'
import { sluice as sluiceFastify } from '../../packages/sluice/src/adapters/fastify.js'
import { sluice as sluiceHono } from '../../packages/sluice/src/adapters/hono.js'
import { withSluice } from '../../packages/sluice/src/adapters/node.js'
import { SluiceError } from '../../packages/sluice/src/errors.js'
import { protectStore } from '../../packages/sluice/src/failover/index.js'
import { createHttpLimiter, type HttpLimiterOptions } from '../../packages/sluice/src/http/index.js'
import { createLimiter, type LimiterOptions } from '../../packages/sluice/src/limiter.js'
import {
  createMetrics,
  createObservability,
  type ObservabilityOptions,
} from '../../packages/sluice/src/metrics/index.js'
import { SpikeDetector } from '../../packages/sluice/src/metrics/spikes.js'
import { SlidingTopK } from '../../packages/sluice/src/metrics/topk.js'
import { closest } from '../../packages/sluice/src/options.js'
import type { Policy } from '../../packages/sluice/src/policy.js'
import { resolvePolicy } from '../../packages/sluice/src/policy.js'
import { LocalDenyCache } from '../../packages/sluice/src/scale/deny-cache.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { createService } from '../../packages/sluice-server/src/index.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'

const policies = {
  api: { algorithm: 'token-bucket', limit: 10, window: '1s' },
  small: { algorithm: 'fixed-window', limit: 3, window: '1m' },
} as const

/** Plain JavaScript: the types are not there to catch anything. */
const js = <T>(value: unknown): T => value as T

/** Run `make`, expect a SluiceError with `code` whose message names `key` and suggests `meant`. */
function expectUnknown(make: () => unknown, key: string, meant: string, code = 'SLUICE_INVALID_OPTIONS') {
  let caught: unknown
  try {
    make()
  } catch (error) {
    caught = error
  }
  expect(caught, `expected ${key} to be refused`).toBeInstanceOf(SluiceError)
  const error = caught as SluiceError
  expect(error.code).toBe(code)
  expect(error.message).toContain(`unknown option '${key}'`)
  expect(error.message).toContain(`did you mean '${meant}'?`)
  return error
}

const limiterWith = (extra: Record<string, unknown>) =>
  createLimiter(js<LimiterOptions<Record<string, Policy>>>({ policies, ...extra }))

const httpWith = (extra: Record<string, unknown>) =>
  createHttpLimiter(
    js<HttpLimiterOptions>({
      limiter: createLimiter({ policies }),
      rules: [{ policy: 'api', key: 'ip' }],
      ...extra,
    }),
  )

describe('createLimiter options', () => {
  it('names a misspelled top-level option and the one meant', () => {
    const error = expectUnknown(
      () => createLimiter(js<LimiterOptions<Record<string, Policy>>>({ stroe: memoryStore(), policies })),
      'stroe',
      'store',
    )
    expect(error.message).toMatch(/^createLimiter: /)
    expectUnknown(() => limiterWith({ storeTimout: '50ms' }), 'storeTimout', 'storeTimeout')
    expectUnknown(() => limiterWith({ onDecison: () => {} }), 'onDecison', 'onDecision')
    expectUnknown(() => limiterWith({ maxInflight: 10 }), 'maxInflight', 'maxInFlight')
  })

  it('checks nested options: breaker and localDenyCache', () => {
    expectUnknown(() => limiterWith({ breaker: { failure: 3 } }), 'failure', 'failures')
    expectUnknown(() => limiterWith({ localDenyCache: { maxkeys: 10 } }), 'maxkeys', 'maxKeys')
  })

  it('refuses a localDenyCache that cannot work, even over the memory store (where it is not used)', () => {
    for (const bad of [{ maxKeys: -3 }, { maxKeys: 0 }, { maxKeys: 1.5 }, { maxKeys: '10' }, 'yes', 5]) {
      expect(() => limiterWith({ localDenyCache: bad }), JSON.stringify(bad)).toThrow(
        expect.objectContaining({
          code: 'SLUICE_INVALID_OPTIONS',
          message: expect.stringContaining('localDenyCache'),
        }),
      )
    }
    expect(() => new LocalDenyCache(js({ maxKeys: -3 }))).toThrow(
      expect.objectContaining({ code: 'SLUICE_INVALID_OPTIONS' }),
    )
  })

  it('accepts every documented option', () => {
    const limiter = createLimiter({
      store: memoryStore(),
      policies,
      onDecision: () => {},
      localDenyCache: { maxKeys: 100 },
      onStoreError: 'closed',
      storeTimeout: '50ms',
      breaker: { failures: 3, cooldown: '2s' },
      maxInFlight: 10,
      instances: 2,
      logger: { warn: () => {} },
      logInterval: '1s',
      onStoreHealth: () => {},
    })
    expect(Object.keys(limiter.policies)).toEqual(['api', 'small'])
    expect(() => limiterWith({ localDenyCache: false })).not.toThrow()
    expect(() => limiterWith({ localDenyCache: true })).not.toThrow()
  })
})

describe('policies', () => {
  it('names an unknown policy key (windw) instead of reporting the missing window', () => {
    const error = expectUnknown(
      () => resolvePolicy('api', { algorithm: 'gcra', limit: 10, windw: '1s' }),
      'windw',
      'window',
      'SLUICE_INVALID_POLICY',
    )
    expect(error.message).toMatch(/^policies\.api: /)
    expect(error.message).not.toContain('must be a duration')
    expectUnknown(
      () => limiterWith({ policies: { p: { algorithm: 'concurrency', limit: 2, timeout: '1s', limt: 3 } } }),
      'limt',
      'limit',
      'SLUICE_INVALID_POLICY',
    )
  })
})

describe('memoryStore options', () => {
  it('names a misspelled option', () => {
    expectUnknown(() => memoryStore(js({ maxkey: 10 })), 'maxkey', 'maxKeys')
    expectUnknown(() => memoryStore(js({ noww: Date.now })), 'noww', 'now')
  })
})

describe('HTTP options, rules and routes', () => {
  it('names misspelled top-level options', () => {
    expectUnknown(() => httpWith({ trustproxy: ['loopback'] }), 'trustproxy', 'trustProxy')
    expectUnknown(() => httpWith({ proxyHeadr: 'x-real-ip' }), 'proxyHeadr', 'proxyHeader')
    expectUnknown(() => httpWith({ shadwo: true }), 'shadwo', 'shadow')
  })

  it('names misspelled keys of nested options: skip, deny, tiers', () => {
    expectUnknown(() => httpWith({ skip: { path: ['/health'] } }), 'path', 'paths')
    expectUnknown(() => httpWith({ deny: { ip: ['10.0.0.1'] } }), 'ip', 'ips')
    expectUnknown(
      () => httpWith({ tiers: { resolve: () => 'free', default: 'free', cachems: 10 } }),
      'cachems',
      'cacheMs',
    )
  })

  it('names a misspelled rule key (kost)', () => {
    const error = expectUnknown(
      () => httpWith({ rules: [{ policy: 'api', key: 'ip', kost: 2 }] }),
      'kost',
      'cost',
    )
    expect(error.message).toMatch(/^rules\[0\]: /)
  })

  it('names a misspelled key of a configured route (routes: { "POST /x": { cots: 5 } })', () => {
    const error = expectUnknown(() => httpWith({ routes: { 'POST /x': { cots: 5 } } }), 'cots', 'cost')
    expect(error.message).toMatch(/^routes\[POST \/x\]: /)
    expectUnknown(
      () => httpWith({ routes: { '/x': { rules: [{ policy: 'api', key: 'ip', rotues: ['GET'] }] } } }),
      'rotues',
      'routes',
    )
  })

  it('names a misspelled key of adapter route options: http.prepare and Express limit.route', () => {
    const http = httpWith({})
    expectUnknown(() => http.prepare(js({ cots: 5 }), 'my route'), 'cots', 'cost')
    const limit = sluiceExpress(http)
    expectUnknown(() => limit.route(js({ cots: 5 })), 'cots', 'cost')
    expectUnknown(() => limit.route(js({ skp: true })), 'skp', 'skip')
  })

  it('names a misspelled adapter option: Hono route, node:http routeOptions', () => {
    const http = httpWith({})
    expectUnknown(() => sluiceHono(http, js({ rotue: { cost: 2 } })), 'rotue', 'route')
    expectUnknown(() => sluiceHono(http, { route: js({ cots: 2 }) }), 'cots', 'cost')
    expectUnknown(
      () => withSluice(http, () => {}, js({ routeOption: () => undefined })),
      'routeOption',
      'routeOptions',
    )
  })

  it('accepts every documented option', () => {
    const http = createHttpLimiter({
      limiter: createLimiter({ policies }),
      rules: [{ policy: { free: 'small', pro: null }, key: ['user', 'route'], routes: ['GET'], cost: 1 }],
      routes: { 'GET /x': { cost: 2, rules: [{ policy: 'api', key: 'ip' }], skip: false } },
      tiers: {
        resolve: () => 'free',
        default: 'free',
        cacheMs: 10,
        cacheBy: 'user',
        cacheSize: 5,
        onError: 'fail',
      },
      user: () => undefined,
      apiKeyHeader: 'x-key',
      trustProxy: ['loopback'],
      proxyHeader: 'x-real-ip',
      ipv6Prefix: 56,
      missingIp: 'reject',
      maxKeyLength: 128,
      skip: { ips: ['10.0.0.1'], paths: ['/health'], routes: ['GET /metrics'], when: () => false },
      deny: { ips: ['10.0.0.2'], when: () => false },
      shadow: false,
      headers: 'draft',
      body: 'problem',
      storeUnavailableStatus: 429,
      onLimited: () => undefined,
      onDecision: () => {},
      onError: 'open',
      logger: { warn: () => {}, error: () => {} },
      now: Date.now,
    })
    expect(http.prepare({ cost: 1, rules: [], skip: true })).toEqual({ cost: 1, rules: [], skip: true })
  })
})

describe('Fastify route config', () => {
  let app: ReturnType<typeof Fastify> | undefined
  afterEach(async () => {
    await app?.close().catch(() => {})
    app = undefined
  })

  it('refuses config.sluice.cots when the route is registered, naming the key and the route', async () => {
    app = Fastify()
    await app.register(sluiceFastify, { http: httpWith({}) })
    let caught: unknown
    try {
      app.post('/x', { config: { sluice: js({ cots: 5 }) } }, async () => 'ok')
      await app.ready()
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(SluiceError)
    expect((caught as SluiceError).code).toBe('SLUICE_INVALID_OPTIONS')
    expect((caught as Error).message).toContain("route POST /x config.sluice: unknown option 'cots'")
    expect((caught as Error).message).toContain("did you mean 'cost'?")
  })
})

describe('observability options', () => {
  it('names a misspelled option', () => {
    const limiter = createLimiter({ policies })
    expectUnknown(
      () => createObservability(js<ObservabilityOptions>({ limiter, flushms: 50 })),
      'flushms',
      'flushMs',
    )
    expectUnknown(
      () => createObservability(js<ObservabilityOptions>({ limiter, dashbordPath: '/d' })),
      'dashbordPath',
      'dashboardPath',
    )
  })
})

describe('the other options objects: metrics pieces, protectStore, createService', () => {
  it('names a misspelled option of each', async () => {
    const limiter = createLimiter({ policies })
    expectUnknown(
      () => createObservability(js<ObservabilityOptions>({ limiter, topKeys: { horizonMS: 1000 } })),
      'horizonMS',
      'horizonMs',
    )
    expectUnknown(
      () => createObservability(js<ObservabilityOptions>({ limiter, spikes: { factr: 3 } })),
      'factr',
      'factor',
    )
    expectUnknown(
      () => createObservability(js<ObservabilityOptions>({ limiter, metrics: { maxLabelValue: 3 } })),
      'maxLabelValue',
      'maxLabelValues',
    )
    expectUnknown(() => createMetrics(js({ maxLabelValue: 3 })), 'maxLabelValue', 'maxLabelValues')
    expectUnknown(() => new SlidingTopK(js({ bucket: 3 })), 'bucket', 'buckets')
    expectUnknown(() => new SpikeDetector(js({ alpah: 0.5 })), 'alpah', 'alpha')
    expectUnknown(() => protectStore(memoryStore(), js({ timeout: 50 })), 'timeout', 'timeoutMs')
    const config = parseConfig('policies:\n  api: { algorithm: gcra, limit: 1, window: 1s }\n', 'inline')
    expectUnknown(() => createService(js({ config, adminTokn: 'x'.repeat(16) })), 'adminTokn', 'adminToken')
  })
})

describe('the YAML config uses the same suggestions', () => {
  const API = '  api: { algorithm: gcra, limit: 1, window: 1s }\n'
  it('suggests the key meant, at the line of the misspelled key', () => {
    expect(() => parseConfig(`policies:\n${API}authz:\n  trustproxy: 1\n`, 'conf.yaml')).toThrow(
      "conf.yaml:4: authz.trustproxy: unknown key; did you mean 'trustProxy'?",
    )
    expect(() => parseConfig(`policies:\n${API}polices: {}\n`, 'conf.yaml')).toThrow(
      "conf.yaml:3: polices: unknown key; did you mean 'policies'?",
    )
    expect(() =>
      parseConfig('policies:\n  api:\n    algorithm: gcra\n    limit: 1\n    windw: 1s\n', 'conf.yaml'),
    ).toThrow("conf.yaml:5: policies.api: unknown option 'windw'; did you mean 'window'?")
  })
})

describe('closest', () => {
  it('finds misspellings (swaps, case, one letter) and nothing for unrelated words', () => {
    expect(closest('stroe', ['store', 'policies'])).toBe('store')
    expect(closest('trustproxy', ['trustProxy', 'proxyHeader'])).toBe('trustProxy')
    expect(closest('kost', ['policy', 'key', 'routes', 'cost'])).toBe('cost')
    expect(closest('storeTimout', ['store', 'storeTimeout'])).toBe('storeTimeout')
    expect(closest('banana', ['store', 'policies'])).toBeUndefined()
    expect(closest('x', ['key', 'cost'])).toBeUndefined()
  })
})
