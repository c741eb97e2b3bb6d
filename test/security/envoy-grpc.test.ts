// Attacks on the gRPC listener Envoy talks to, against the real service on a real redis-server:
// every malformed or oversized request gets a gRPC status with a clear message, and nothing stored
// changes (no key written, no counter spent). The listener binds 127.0.0.1 unless told otherwise.
import { randomBytes } from 'node:crypto'
import { status } from '@grpc/grpc-js'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { parseEnvoyConfig } from '../../packages/sluice-server/src/envoy/config.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import type { Service } from '../../packages/sluice-server/src/server/service.js'
import { createService } from '../../packages/sluice-server/src/server/service.js'
import { openStore } from '../../packages/sluice-server/src/server/store-url.js'
import type { RlsClient, RlsRequest } from '../helpers/envoy.js'
import { d, rlsClient } from '../helpers/envoy.js'
import { quietLogger } from '../helpers/service.js'

const prefix = `envoy-sec-${randomBytes(4).toString('hex')}`
let service: Service
let client: RlsClient
let redis: Redis

beforeAll(async () => {
  const rules = parseEnvoyConfig([
    {
      file: 'rules.yaml',
      text: 'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n',
    },
  ])
  service = createService({
    config: parseConfig('policies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\n', 't.yaml'),
    logger: quietLogger,
    store: await openStore(inject('redis').url, { prefix }),
    envoy: rules,
    grpc: { port: 0 },
  })
  await service.listen(0)
  client = rlsClient(service.grpcAddress!.url)
  redis = new Redis(inject('redis').port, '127.0.0.1')
})
afterAll(async () => {
  client?.close()
  await service?.close(500)
  redis?.disconnect()
})

const storedKeys = async () => (await redis.keys(`${prefix}*`)).sort()
/** Every stored key with its serialized value (DUMP): any counter spent shows as a change. */
async function stored(): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const key of await storedKeys()) out[key] = (await redis.dumpBuffer(key))?.toString('hex') ?? ''
  return out
}

const valid = (value = 'u1'): RlsRequest => ({ domain: 'd', descriptors: [d(['user', value])] })

const REFUSED: [string, RlsRequest, number, RegExp][] = [
  ['an empty domain', { ...valid(), domain: '' }, status.INVALID_ARGUMENT, /domain is empty/],
  [
    'an unknown domain',
    { ...valid(), domain: 'other' },
    status.NOT_FOUND,
    /unknown domain "other"; configured: d/,
  ],
  ['no descriptors', { domain: 'd', descriptors: [] }, status.INVALID_ARGUMENT, /no descriptors/],
  [
    'an empty descriptor',
    { domain: 'd', descriptors: [{ entries: [] }] },
    status.INVALID_ARGUMENT,
    /descriptors\[0\] has no entries/,
  ],
  [
    'an empty value',
    { domain: 'd', descriptors: [d(['user', ''])] },
    status.INVALID_ARGUMENT,
    /entries\[0\]\.value is empty/,
  ],
  [
    'a huge hits_addend',
    { ...valid(), hits_addend: 4_294_967_295 },
    status.INVALID_ARGUMENT,
    /hits_addend 4294967295 is over 1000000/,
  ],
  [
    'hits_addend over the limit',
    { ...valid(), hits_addend: 6 },
    status.INVALID_ARGUMENT,
    /hits_addend 6 can never be admitted/,
  ],
  ['a 2 KB value', valid('v'.repeat(2048)), status.INVALID_ARGUMENT, /value is over 1024 bytes/],
  ['a 1 MB value', valid('v'.repeat(1024 * 1024)), status.RESOURCE_EXHAUSTED, /larger than max/],
  [
    '65 descriptors',
    { domain: 'd', descriptors: Array.from({ length: 65 }, (_, i) => d(['user', `u${i}`])) },
    status.INVALID_ARGUMENT,
    /65 descriptors; at most 64/,
  ],
  [
    '17 entries in a descriptor',
    {
      domain: 'd',
      descriptors: [d(...Array.from({ length: 17 }, (_, i): [string, string] => [`k${i}`, 'v']))],
    },
    status.INVALID_ARGUMENT,
    /17 entries; at most 16/,
  ],
  [
    'a per-request override of 0 per unknown unit',
    {
      domain: 'd',
      descriptors: [{ ...d(['user', 'u1']), limit: { requests_per_unit: 0, unit: 'UNKNOWN' } }],
    },
    status.INVALID_ARGUMENT,
    /limit needs requests_per_unit >= 1/,
  ],
  [
    'an override too large to count exactly',
    {
      domain: 'd',
      descriptors: [{ ...d(['user', 'u1']), limit: { requests_per_unit: 4_000_000_000, unit: 'DAY' } }],
    },
    status.INVALID_ARGUMENT,
    /limit cannot be used/,
  ],
]

describe('bad requests to ShouldRateLimit', () => {
  it('binds 127.0.0.1 by default', () => {
    expect(service.grpcAddress!.host).toBe('127.0.0.1')
  })

  for (const [what, request, code, message] of REFUSED) {
    it(`refuses ${what} with a gRPC status, storing nothing`, async () => {
      // Good requests first, so there are counters (u1's among them) to leave untouched.
      await client.shouldRateLimit(valid())
      await client.shouldRateLimit(valid('u2'))
      const before = await stored()
      expect(Object.keys(before).length).toBeGreaterThan(0)
      const error = await client.refused(request)
      expect(error.code).toBe(code)
      expect(error.details).toMatch(message)
      expect(await stored()).toEqual(before)
      await redis.del(...(await storedKeys()))
    })
  }
})

describe('grpc.trustedPeers', () => {
  it('answers only the peers it lists: a loopback caller is refused when only 10.0.0.0/8 is', async () => {
    const config = parseConfig(
      "policies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\ngrpc: { port: 0, trustedPeers: ['10.0.0.0/8'] }\nenvoy: { config: rules.yaml }\n",
      't.yaml',
    )
    const ownPrefix = `envoy-peer-${randomBytes(4).toString('hex')}`
    const guarded = createService({
      config,
      logger: quietLogger,
      store: await openStore(inject('redis').url, { prefix: ownPrefix }),
      envoy: parseEnvoyConfig([
        {
          file: 'rules.yaml',
          text: 'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n',
        },
      ]),
    })
    await guarded.listen(0)
    const outsider = rlsClient(guarded.grpcAddress!.url)
    try {
      const error = await outsider.refused(valid())
      expect(error.code).toBe(status.PERMISSION_DENIED)
      expect(error.details).toMatch(/peer 127\.0\.0\.1 is not in grpc\.trustedPeers/)
      expect(await redis.keys(`${ownPrefix}*`)).toEqual([])
      // The default, [loopback], answers the same caller (the service of the tests above).
      expect((await client.shouldRateLimit(valid('u9'))).overall_code).toBe('OK')
    } finally {
      outsider.close()
      await guarded.close(500)
    }
  })

  it('refuses an entry that is not an address, naming file and line', () => {
    expect(() =>
      parseConfig(
        "policies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\ngrpc: { port: 1, trustedPeers: ['envoy'] }\n",
        't.yaml',
      ),
    ).toThrow(/t\.yaml:3: grpc\.trustedPeers: "envoy" is not an address/)
  })
})
