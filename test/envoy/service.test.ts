// The gRPC service Envoy talks to, through a client built from the proto, against the real service
// on the memory store and on a real redis-server: matching, counting, the fields Envoy reads,
// shadow mode, replaces, wildcards, overrides, extensions, tiers, charging modes and headers.
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { afterEach, describe, expect, inject, it } from 'vitest'
import { forwardStore } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import type { EnvoyRules } from '../../packages/sluice-server/src/envoy/config.js'
import { loadEnvoyConfig, parseEnvoyConfig } from '../../packages/sluice-server/src/envoy/config.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import type { Service } from '../../packages/sluice-server/src/server/service.js'
import { createService } from '../../packages/sluice-server/src/server/service.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import type { StoreHandle } from '../../packages/sluice-server/src/server/types.js'
import type { RlsClient } from '../helpers/envoy.js'
import { d, FIXTURES, rlsClient } from '../helpers/envoy.js'
import { startRedis } from '../helpers/redis-harness.js'
import { quietLogger } from '../helpers/service.js'

const running: { service: Service; client: RlsClient }[] = []
afterEach(async () => {
  for (const r of running.splice(0)) {
    r.client.close()
    await r.service.close(500)
  }
})

const inline = (text: string): EnvoyRules => parseEnvoyConfig([{ file: 'rules.yaml', text }])

for (const storeKind of ['memory', 'redis'] as const) {
  describe(`ShouldRateLimit on the ${storeKind} store`, () => {
    async function start(envoy: EnvoyRules, extraYaml = ''): Promise<RlsClient> {
      const config = parseConfig(
        `policies:\n  api: { algorithm: fixed-window, limit: 10, window: 1m }\n${extraYaml}`,
        'test.yaml',
      )
      const store =
        storeKind === 'memory'
          ? undefined
          : await openStore(inject('redis').url, { prefix: `envoy-${randomBytes(4).toString('hex')}` })
      const service = createService({
        config,
        logger: quietLogger,
        envoy,
        grpc: { port: 0 },
        ...(store === undefined ? {} : { store }),
      })
      await service.listen(0)
      const client = rlsClient(service.grpcAddress!.url)
      running.push({ service, client })
      return client
    }

    it('answers the most specific entry of storefront.yaml with the fields Envoy reads', async () => {
      const client = await start(await loadEnvoyConfig(join(FIXTURES, 'valid', 'storefront.yaml')))
      const first = await client.shouldRateLimit({
        domain: 'storefront',
        descriptors: [d(['client', 'mobile-app'])],
      })
      expect(first.overall_code).toBe('OK')
      const status = first.statuses[0]!
      expect(status.code).toBe('OK')
      expect(status.current_limit).toEqual({
        name: 'storefront.client_mobile-app',
        requests_per_unit: 90,
        unit: 'MINUTE',
      })
      expect(status.limit_remaining).toBe(89)
      const resetS = status.duration_until_reset!.seconds + status.duration_until_reset!.nanos / 1e9
      expect(resetS).toBeGreaterThan(0)
      expect(resetS).toBeLessThanOrEqual(60)
      // client with another value: the key-only default (40/min), counted per value.
      const other = await client.shouldRateLimit({
        domain: 'storefront',
        descriptors: [d(['client', 'web-7'])],
      })
      expect(other.statuses[0]!.current_limit!.requests_per_unit).toBe(40)
      expect(other.statuses[0]!.limit_remaining).toBe(39)
      // client=healthcheck has no limit (a whitelist), internal is unlimited, tenant=acme alone has
      // none, nor an unknown key.
      const free = await client.shouldRateLimit({
        domain: 'storefront',
        descriptors: [
          d(['client', 'healthcheck']),
          d(['internal', 'x']),
          d(['tenant', 'acme']),
          d(['nope', 'x']),
        ],
      })
      expect(free.overall_code).toBe('OK')
      for (const s of free.statuses) expect(s).toMatchObject({ code: 'OK', current_limit: null })
      // Nested: plan=trial then feature=export -> 4/day; three levels down to method=POST -> 3/s;
      // account's limit has a name of its own.
      const nested = await client.shouldRateLimit({
        domain: 'storefront',
        descriptors: [
          d(['plan', 'trial'], ['feature', 'export']),
          d(['tenant', 'acme'], ['route', 'checkout'], ['method', 'POST']),
          d(['account', 'a']),
        ],
      })
      expect(nested.statuses.map((s) => s.current_limit)).toEqual([
        { name: 'storefront.plan_trial.feature_export', requests_per_unit: 4, unit: 'DAY' },
        { name: 'storefront.tenant_acme.route_checkout.method_POST', requests_per_unit: 3, unit: 'SECOND' },
        { name: 'account_daily', requests_per_unit: 3, unit: 'DAY' },
      ])
    })

    it('counts hits_addend and answers OVER_LIMIT past the limit', async () => {
      const client = await start(
        inline(
          'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n',
        ),
      )
      const req = (hits: number) => ({ domain: 'd', descriptors: [d(['user', 'u1'])], hits_addend: hits })
      expect((await client.shouldRateLimit(req(3))).statuses[0]!.limit_remaining).toBe(2)
      expect((await client.shouldRateLimit(req(0))).statuses[0]!.limit_remaining).toBe(1) // 0 means 1
      const over = await client.shouldRateLimit(req(2))
      expect(over.overall_code).toBe('OVER_LIMIT')
      expect(over.statuses[0]!.code).toBe('OVER_LIMIT')
      expect(over.statuses[0]!.limit_remaining).toBe(1)
      // Another user has its own counter.
      const u2 = await client.shouldRateLimit({ domain: 'd', descriptors: [d(['user', 'u2'])] })
      expect(u2.statuses[0]!.limit_remaining).toBe(4)
    })

    const twoLimits =
      'domain: d\ndescriptors:\n  - key: tight\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n  - key: wide\n    rate_limit: { unit: hour, requests_per_unit: 10 }\n'

    it('charges no descriptor when one is over (all-or-nothing, the default)', async () => {
      const client = await start(inline(twoLimits))
      const both = { domain: 'd', descriptors: [d(['tight', 'a']), d(['wide', 'a'])] }
      expect((await client.shouldRateLimit(both)).overall_code).toBe('OK')
      const denied = await client.shouldRateLimit(both)
      expect(denied.overall_code).toBe('OVER_LIMIT')
      expect(denied.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OK'])
      const wide = await client.shouldRateLimit({ domain: 'd', descriptors: [d(['wide', 'a'])] })
      expect(wide.statuses[0]!.limit_remaining).toBe(8) // charged once, not for the denied request
    })

    it('charges every descriptor with envoy.charge: every (envoyproxy/ratelimit behaviour)', async () => {
      const client = await start(inline(twoLimits), 'envoy: { config: unused.yaml, charge: every }\n')
      const both = { domain: 'd', descriptors: [d(['tight', 'a']), d(['wide', 'a'])] }
      await client.shouldRateLimit(both)
      expect((await client.shouldRateLimit(both)).overall_code).toBe('OVER_LIMIT')
      const wide = await client.shouldRateLimit({ domain: 'd', descriptors: [d(['wide', 'a'])] })
      expect(wide.statuses[0]!.limit_remaining).toBe(7)
    })

    it('answers OK in shadow mode while counting, and does not block the other descriptors', async () => {
      const client = await start(
        inline(
          'domain: d\ndescriptors:\n  - key: s\n    shadow_mode: true\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n  - key: w\n    rate_limit: { unit: hour, requests_per_unit: 10 }\n',
        ),
      )
      const req = { domain: 'd', descriptors: [d(['s', 'a']), d(['w', 'a'])] }
      await client.shouldRateLimit(req)
      const second = await client.shouldRateLimit(req)
      expect(second.overall_code).toBe('OK')
      expect(second.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 0 })
      expect(second.statuses[1]!.limit_remaining).toBe(8)
    })

    it('drops a limit another applicable limit replaces (gateway.yaml)', async () => {
      const client = await start(await loadEnvoyConfig(join(FIXTURES, 'valid', 'gateway.yaml')))
      // user/action=upload is the limit named upload_per_user (1/hour); plan=enterprise replaces it.
      const req = {
        domain: 'gateway',
        descriptors: [d(['user', 'u7'], ['action', 'upload']), d(['plan', 'enterprise'])],
      }
      const first = await client.shouldRateLimit(req)
      expect(first.statuses[0]).toMatchObject({ code: 'OK', current_limit: null })
      expect(first.statuses[1]!.current_limit!.requests_per_unit).toBe(6)
      // Alone, upload_per_user applies: one an hour.
      const alone = { domain: 'gateway', descriptors: [d(['user', 'u7'], ['action', 'upload'])] }
      expect((await client.shouldRateLimit(alone)).overall_code).toBe('OK')
      expect((await client.shouldRateLimit(alone)).overall_code).toBe('OVER_LIMIT')
      // requests_per_unit: 0 (scraping_banned) is always over the limit.
      const scrape = d(['user', 'u7'], ['action', 'scrape'])
      const banned = await client.shouldRateLimit({ domain: 'gateway', descriptors: [scrape] })
      expect(banned.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limit_remaining: 0 })
      // A second-level limit replaces it: the support crawler's request is not banned.
      const crawler = d(['session', 'support'], ['tool', 'crawler'])
      const lifted = await client.shouldRateLimit({ domain: 'gateway', descriptors: [scrape, crawler] })
      expect(lifted.overall_code).toBe('OK')
      expect(lifted.statuses[0]).toMatchObject({ code: 'OK', current_limit: null })
      expect(lifted.statuses[1]!.current_limit!.requests_per_unit).toBe(2)
    })

    it('serves the valid/ folder: wildcards, share_threshold, shadow mode, every unit, a merged domain', async () => {
      const client = await start(await loadEnvoyConfig(join(FIXTURES, 'valid')))
      const one = async (domain: string, ...pairs: [string, string][]) =>
        (await client.shouldRateLimit({ domain, descriptors: [d(...pairs)] })).statuses[0]!
      const rate = async (domain: string, ...pairs: [string, string][]) =>
        (await one(domain, ...pairs)).current_limit?.requests_per_unit
      // media.yaml: an exact value, then wildcards in file order, then the key alone.
      expect(await rate('media', ['asset', 'thumb-hero'])).toBe(300)
      expect((await one('media', ['asset', 'thumb-1'])).limit_remaining).toBe(29)
      expect((await one('media', ['asset', 'thumb-2'])).limit_remaining).toBe(29) // per value
      expect(await rate('media', ['asset', 'poster'])).toBe(5)
      expect(await rate('media', ['codec', 'h265'])).toBe(2)
      expect(await rate('media', ['codec', 'hevc'])).toBe(20)
      expect(await rate('media', ['image', 'scan-7.tiff'])).toBe(9)
      expect(await rate('media', ['image', 'scan-7xtiff'])).toBeUndefined()
      expect(await rate('media', ['stream', 'live-news-720p-b'])).toBe(16)
      expect(await rate('media', ['album', 'public'], ['photo', 'IMG_0042'])).toBe(25)
      // uploads.yaml: share_threshold gives every value a wildcard matches one counter, per level.
      expect((await one('uploads', ['path', '/bucket/a'])).limit_remaining).toBe(49)
      expect((await one('uploads', ['path', '/bucket/b'])).limit_remaining).toBe(48)
      expect((await one('uploads', ['path', '/team/x'], ['path', 'drafts/1'])).limit_remaining).toBe(19)
      expect((await one('uploads', ['path', '/team/y'], ['path', 'drafts/2'])).limit_remaining).toBe(18)
      const log = (bucket: string, object: string) =>
        one('uploads', ['bucket', bucket], ['object', object], ['op', 'put'])
      expect((await log('logs-a', '2024-01')).limit_remaining).toBe(99)
      expect((await log('logs-b', '2024-01')).limit_remaining).toBe(98) // shared bucket level
      expect((await log('logs-b', '2024-02')).limit_remaining).toBe(99) // share_threshold: false
      // search.yml: shadow mode counts and reports but never denies; false is enforced.
      const facets = {
        domain: 'search',
        descriptors: [
          d(['index', 'products'], ['facet', 'price']),
          d(['index', 'products'], ['facet', 'brand']),
        ],
      }
      expect((await client.shouldRateLimit(facets)).overall_code).toBe('OK')
      const second = await client.shouldRateLimit(facets)
      expect(second.overall_code).toBe('OVER_LIMIT')
      expect(second.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
        ['OK', 0],
        ['OVER_LIMIT', 0],
      ])
      // notify.yaml: every unit, as the reply names it.
      const units = {
        push: 'SECOND',
        email: 'MINUTE',
        sms: 'HOUR',
        voice: 'DAY',
        letter: 'MONTH',
        audit_export: 'YEAR',
      }
      for (const [key, unit] of Object.entries(units))
        expect((await one('notify', [key, 'x'])).current_limit!.unit, key).toBe(unit)
      // inventory-east.yaml and inventory-west.yaml: one domain.
      expect(await rate('inventory', ['warehouse', 'east'])).toBe(25)
      expect(await rate('inventory', ['warehouse', 'west'])).toBe(40)
      // catalog.yaml: metadata and quota_mode change nothing.
      expect(await rate('catalog', ['supplier', 'northwind'])).toBe(100)
    })

    it('matches wildcards; share_threshold gives every matching value one counter', async () => {
      const client = await start(
        inline(
          'domain: d\ndescriptors:\n  - key: path\n    value: /api/*\n    share_threshold: true\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n  - key: file\n    value: img*\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n  - key: file\n    value: img1\n    rate_limit: { unit: hour, requests_per_unit: 50 }\n',
        ),
      )
      const one = async (key: string, value: string) =>
        (await client.shouldRateLimit({ domain: 'd', descriptors: [d([key, value])] })).statuses[0]!
      expect((await one('path', '/api/a')).limit_remaining).toBe(4)
      expect((await one('path', '/api/b')).limit_remaining).toBe(3) // shared
      expect((await one('file', 'img-a')).limit_remaining).toBe(4)
      expect((await one('file', 'img-b')).limit_remaining).toBe(4) // per value
      expect((await one('file', 'img1')).current_limit!.requests_per_unit).toBe(50) // exact wins
      expect((await one('path', '/other')).current_limit).toBeNull()
    })

    it("applies Envoy's per-request limit override", async () => {
      const client = await start(
        inline(
          'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 100 }\n',
        ),
      )
      const req = {
        domain: 'd',
        descriptors: [{ ...d(['user', 'u']), limit: { requests_per_unit: 2, unit: 'MINUTE' } }],
      }
      const first = await client.shouldRateLimit(req)
      expect(first.statuses[0]!.current_limit).toMatchObject({ requests_per_unit: 2, unit: 'MINUTE' })
      expect(first.statuses[0]!.limit_remaining).toBe(1)
      await client.shouldRateLimit(req)
      expect((await client.shouldRateLimit(req)).overall_code).toBe('OVER_LIMIT')
      // The configured limit is untouched.
      const plain = await client.shouldRateLimit({ domain: 'd', descriptors: [d(['user', 'u'])] })
      expect(plain.statuses[0]!.limit_remaining).toBe(99)
    })

    it('uses the algorithm and window a descriptor sets, and tiers through descriptor values', async () => {
      const client = await start(
        inline(
          [
            'domain: d',
            'descriptors:',
            '  - key: plan',
            '    value: free',
            '    descriptors:',
            '      - key: user',
            '        rate_limit: { algorithm: sliding-window-log, requests_per_unit: 2, window: 5m }',
            '  - key: plan',
            '    value: pro',
            '    descriptors:',
            '      - key: user',
            '        rate_limit: { algorithm: token-bucket, requests_per_unit: 10, window: 1m, burst: 4 }',
            '',
          ].join('\n'),
        ),
      )
      const as = (plan: string) => ({ domain: 'd', descriptors: [d(['plan', plan], ['user', 'u'])] })
      const free = await client.shouldRateLimit(as('free'))
      expect(free.statuses[0]!.current_limit).toMatchObject({ requests_per_unit: 2, unit: 'UNKNOWN' })
      await client.shouldRateLimit(as('free'))
      const freeOver = await client.shouldRateLimit(as('free'))
      expect(freeOver.overall_code).toBe('OVER_LIMIT')
      // A sliding log denies until the oldest entry leaves: up to 5 minutes.
      expect(freeOver.statuses[0]!.duration_until_reset!.seconds).toBeGreaterThan(250)
      // pro: token bucket with a burst of 4, the same user key.
      const pro = await client.shouldRateLimit(as('pro'))
      expect(pro.statuses[0]!.limit_remaining).toBe(3)
    })

    it('adds RateLimit headers to response_headers_to_add with envoy.responseHeaders', async () => {
      const client = await start(
        inline(
          'domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: minute, requests_per_unit: 3 }\n  - key: b\n    rate_limit: { unit: hour, requests_per_unit: 10 }\n',
        ),
        'envoy: { config: unused.yaml, responseHeaders: true }\n',
      )
      const res = await client.shouldRateLimit({ domain: 'd', descriptors: [d(['a', 'x']), d(['b', 'x'])] })
      const headers = Object.fromEntries(res.response_headers_to_add.map((h) => [h.key, h.value]))
      expect(headers['RateLimit-Limit']).toBe('3')
      expect(headers['RateLimit-Remaining']).toBe('2')
      expect(Number(headers['RateLimit-Reset'])).toBeGreaterThan(0)
      expect(Number(headers['RateLimit-Reset'])).toBeLessThanOrEqual(60)
    })
  })
}

describe('lifecycle of the gRPC listener', () => {
  /** A real memory store answering 40 ms late, so a call is still in flight when close() starts. */
  function slowStore(): StoreHandle {
    const inner = memoryStore()
    const later = () => new Promise((r) => setTimeout(r, 40))
    const store = forwardStore(inner, {
      name: 'slow-memory',
      inProcess: false,
      apply: async (steps, mode) => {
        await later()
        return inner.apply(steps, mode)
      },
    })
    return { store, description: 'slow memory', ping: async () => {} }
  }

  it('finishes an in-flight call on close(), then refuses new ones', async () => {
    const service = createService({
      config: parseConfig('policies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\n', 't.yaml'),
      logger: quietLogger,
      store: slowStore(),
      envoy: inline(
        'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n',
      ),
      grpc: { port: 0 },
    })
    await service.listen(0)
    const client = rlsClient(service.grpcAddress!.url)
    try {
      await client.shouldRateLimit({ domain: 'd', descriptors: [d(['user', 'warm'])] })
      const inFlight = client.shouldRateLimit({ domain: 'd', descriptors: [d(['user', 'a'])] })
      await new Promise((r) => setTimeout(r, 10))
      const closed = service.close(2000)
      expect((await inFlight).statuses[0]!.limit_remaining).toBe(4)
      await closed
      expect((await client.refused({ domain: 'd', descriptors: [d(['user', 'a'])] })).code).toBe(14)
    } finally {
      client.close()
    }
  })

  it('reload() swaps the Envoy rules, keeping counters of unchanged limits', async () => {
    const config = parseConfig(
      'policies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\n',
      't.yaml',
    )
    const rulesOf = (limit: number, unit = 'hour') =>
      inline(
        `domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: ${unit}, requests_per_unit: ${limit} }\n`,
      )
    const service = createService({ config, logger: quietLogger, envoy: rulesOf(5), grpc: { port: 0 } })
    await service.listen(0)
    const client = rlsClient(service.grpcAddress!.url)
    running.push({ service, client })
    const ask = () => client.shouldRateLimit({ domain: 'd', descriptors: [d(['user', 'a'])] })
    await ask()
    service.reload(config, rulesOf(10))
    expect((await ask()).statuses[0]).toMatchObject({
      limit_remaining: 8,
      current_limit: { requests_per_unit: 10 },
    })
    service.reload(config, rulesOf(10, 'minute')) // another window: fresh counters
    expect((await ask()).statuses[0]!.limit_remaining).toBe(9)
    // The envoy: settings of a reloaded config apply from the next call on, the rules kept.
    expect((await ask()).response_headers_to_add).toEqual([])
    const withHeaders = parseConfig(
      'policies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\nenvoy: { config: unused.yaml, responseHeaders: true }\n',
      't.yaml',
    )
    service.reload(withHeaders)
    const headed = await ask()
    expect(headed.statuses[0]!.limit_remaining).toBe(7)
    expect(headed.response_headers_to_add).toContainEqual(
      expect.objectContaining({ key: 'RateLimit-Remaining', value: '7' }),
    )
    // Metrics: the same registry as the HTTP API, under the rule's composite key.
    const metrics = await service.registry.metrics()
    expect(metrics).toContain('policy="envoy:d.user"')
  })

  it('answers UNAVAILABLE when the store fails under onStoreError: closed (Envoy decides)', async () => {
    const redis = await startRedis()
    const service = createService({
      config: parseConfig(
        'onStoreError: closed\npolicies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\n',
        't.yaml',
      ),
      logger: quietLogger,
      store: await openStore(redis.url, { prefix: 'envoy-down' }),
      envoy: inline(
        'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n',
      ),
      grpc: { port: 0 },
    })
    await service.listen(0)
    const client = rlsClient(service.grpcAddress!.url)
    running.push({ service, client })
    const req = { domain: 'd', descriptors: [d(['user', 'a'])] }
    expect((await client.shouldRateLimit(req)).overall_code).toBe('OK')
    await redis.stop()
    const error = await client.refused(req)
    expect(error.code).toBe(14)
    expect(error.details).toMatch(/the store did not answer; Envoy's failure_mode_deny decides/)
  })
})
