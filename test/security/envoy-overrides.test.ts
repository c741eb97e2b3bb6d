// Envoy's per-request limits (a descriptor's `limit`) each need a policy of their own. Against the
// real service and its gRPC listener: a stream of distinct limits keeps at most
// envoy.maxOverridePolicies of them (the least recently used dropped, counted in /metrics), the
// dashboard snapshot stays bounded, and dropping a policy loses no counts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { DashboardSnapshot } from '../../packages/sluice/src/metrics/observability.js'
import { parseEnvoyConfig } from '../../packages/sluice-server/src/envoy/config.js'
import { parseConfig } from '../../packages/sluice-server/src/server/config.js'
import type { Service } from '../../packages/sluice-server/src/server/service.js'
import { createService } from '../../packages/sluice-server/src/server/service.js'
import type { RlsClient, RlsRequest } from '../helpers/envoy.js'
import { d, rlsClient } from '../helpers/envoy.js'
import { sample } from '../helpers/exposition.js'
import { quietLogger } from '../helpers/service.js'

const SHAPES = 400
const MAX = 8

const overridden = (user: string, requestsPerUnit: number): RlsRequest => ({
  domain: 'd',
  descriptors: [{ ...d(['user', user]), limit: { requests_per_unit: requestsPerUnit, unit: 'HOUR' } }],
})

describe('per-request limits keep bounded state', () => {
  let service: Service
  let client: RlsClient
  let url: string
  let snapshotText: string
  let metrics: string
  const keptCounter: string[] = []

  beforeAll(async () => {
    service = createService({
      config: parseConfig(
        'policies:\n  api: { algorithm: fixed-window, limit: 10, window: 1m }\n' +
          `envoy: { config: rules.yaml, maxOverridePolicies: ${MAX} }\n`,
        'sluice.yaml',
      ),
      logger: quietLogger,
      envoy: parseEnvoyConfig([
        {
          file: 'rules.yaml',
          // A sliding log: an override takes the configured algorithm, and no window edge can fall
          // between the calls below.
          text: 'domain: d\ndescriptors:\n  - key: user\n    rate_limit: { algorithm: sliding-window-log, unit: hour, requests_per_unit: 100 }\n',
        },
      ]),
      grpc: { port: 0 },
    })
    ;({ url } = await service.listen(0))
    client = rlsClient(service.grpcAddress!.url)
    // `keep` spends its 2 per hour under one override before the flood...
    for (let i = 0; i < 3; i++)
      keptCounter.push((await client.shouldRateLimit(overridden('keep', 2))).overall_code)
    // ...then SHAPES distinct limits, 20 calls in flight at a time.
    for (let start = 1; start <= SHAPES; start += 20) {
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          client.shouldRateLimit(overridden(`u${(start + i) % 7}`, 100 + start + i)),
        ),
      )
    }
    // ...and after it, its policy long dropped, asks again under the same limit and under 3.
    keptCounter.push((await client.shouldRateLimit(overridden('keep', 2))).overall_code)
    const three = await client.shouldRateLimit(overridden('keep', 3))
    keptCounter.push(`${three.overall_code}, ${three.statuses[0]!.limit_remaining} left`)
    metrics = await (await fetch(`${url}/metrics`)).text()
    snapshotText = await (await fetch(`${url}/dashboard/snapshot.json`)).text()
  }, 60_000)

  afterAll(async () => {
    client?.close()
    await service?.close(500)
  })

  it('keeps at most maxOverridePolicies, counting the ones dropped in /metrics', () => {
    // Policies made: `keep`'s 2 per hour, SHAPES others, 2 per hour again (dropped in between) and
    // 3 per hour: SHAPES + 3. MAX kept at the end.
    expect(sample(metrics, 'sluice_envoy_override_policies')).toBe(MAX)
    expect(sample(metrics, 'sluice_envoy_override_policies_dropped_total')).toBe(SHAPES + 3 - MAX)
  })

  it('a dropped policy loses no counts: one counter per descriptor and unit, whatever requests_per_unit says', () => {
    // 2 admitted, the 3rd over; after the flood still over at 2, and at 3 the one unit left.
    expect(keptCounter).toEqual(['OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT', 'OK, 0 left'])
  })

  it('the dashboard snapshot lists a bounded number of policies and counts the rest', () => {
    const snapshot = JSON.parse(snapshotText) as DashboardSnapshot
    expect(snapshot.policies.length).toBeLessThanOrEqual(50)
    const named = snapshot.policies.length + snapshot.otherPolicies.count + snapshot.otherPolicies.dropped
    expect(named).toBe(SHAPES + 2)
    // 50 policies with their series and top keys; every one of the 402 would be about 2 KB each.
    expect(Buffer.byteLength(snapshotText)).toBeLessThan(200_000)
  })

  it('the default is documented: 256 override policies', () => {
    const config = parseConfig(
      'policies:\n  api: { algorithm: fixed-window, limit: 1, window: 1m }\n',
      't.yaml',
    )
    expect(config.envoy.maxOverridePolicies).toBe(256)
  })
})
