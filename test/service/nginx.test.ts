// A real nginx (Debian package) in front of a tiny upstream, asking the service through
// auth_request with exactly examples/nginx/sluice.conf (only its three ports replaced).

import type { Server } from 'node:http'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RunningNginx } from '../helpers/nginx-harness.js'
import { startShippedNginx } from '../helpers/nginx-harness.js'
import type { Running } from '../helpers/service.js'
import { freePort, startService } from '../helpers/service.js'

describe('nginx auth_request in front of the service', () => {
  let sluice: Running
  let upstream: Server
  let upstreamHits = 0
  let nginx: RunningNginx | undefined

  beforeAll(async () => {
    sluice = await startService('policies:\n  api: { algorithm: fixed-window, limit: 3, window: 1m }\n')
    upstream = createServer((_req, res) => {
      upstreamHits++
      res.writeHead(200, { 'content-type': 'text/plain' }).end('upstream ok')
    })
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    nginx = await startShippedNginx({
      sluice: Number(new URL(sluice.url).port),
      upstream: (upstream.address() as AddressInfo).port,
      nginx: await freePort(),
    })
  })

  afterAll(async () => {
    await nginx?.stop()
    await new Promise((resolve) => upstream?.close(resolve))
    await sluice?.service.close()
  })

  it('passes allowed requests with rate-limit headers, then gives the client 429 with Retry-After', async () => {
    const results = []
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`http://127.0.0.1:${nginx!.port}/some/page`)
      results.push({ status: res.status, body: await res.text(), headers: res.headers })
    }
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 429, 429])
    expect(upstreamHits).toBe(3)
    expect(results[0]!.body).toBe('upstream ok')
    expect(results[0]!.headers.get('x-ratelimit-limit')).toBe('3')
    expect(results[2]!.headers.get('x-ratelimit-remaining')).toBe('0')
    // The IETF headers reach the client on 200 and on 429 too.
    expect(results[0]!.headers.get('ratelimit-policy')).toBe('"api";q=3;w=60')
    expect(results[0]!.headers.get('ratelimit')).toMatch(/^"api";r=2;t=\d+$/)
    const denied = results[3]!
    expect(denied.headers.get('ratelimit-policy')).toBe('"api";q=3;w=60')
    expect(denied.headers.get('ratelimit')).toMatch(/^"api";r=0;t=\d+$/)
    const retryAfter = Number(denied.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(60)
    expect(denied.headers.get('content-type')).toContain('application/json')
    expect(JSON.parse(denied.body)).toMatchObject({ error: 'rate_limit_exceeded', retry_after: retryAfter })
  })
})
