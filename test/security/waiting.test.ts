// The waiting endpoints attacked through real sockets: bad bodies get typed codes and store nothing,
// a flood of long polls is bounded, a client that hangs up frees its place, settle ids cannot be
// guessed into someone else's reservation.
import { request } from 'node:http'
import { describe, expect, it } from 'vitest'
import { post, servicesClosedAfterEach } from '../helpers/service.js'

const start = servicesClosedAfterEach()

const YAML = `
policies:
  api:    { algorithm: fixed-window, limit: 1, window: 400ms }
  tokens: { algorithm: fixed-window, limit: 100, window: 1m }
waiting: { maxWait: 2s }
`

async function remaining(url: string, policy: string, key: string): Promise<number> {
  return (await post(`${url}/v1/peek`, { policy, key })).body.remaining as number
}

describe('bad bodies on /v1/wait, /v1/reserve, /v1/settle/{id}', () => {
  const waitCases: [string, unknown, string][] = [
    ['negative maxWaitMs', { policy: 'tokens', key: 'k', maxWaitMs: -1 }, 'invalid_wait'],
    ['text maxWaitMs', { policy: 'tokens', key: 'k', maxWaitMs: '5s' }, 'invalid_wait'],
    ['fractional maxWaitMs', { policy: 'tokens', key: 'k', maxWaitMs: 1.5 }, 'invalid_wait'],
    ['unknown field', { policy: 'tokens', key: 'k', priority: 1 }, 'unknown_field'],
    ['unknown policy', { policy: 'nope', key: 'k' }, 'unknown_policy'],
    ['cost above capacity', { policy: 'tokens', key: 'k', cost: 101 }, 'invalid_cost'],
    ['missing key', { policy: 'tokens' }, 'invalid_key'],
  ]
  const reserveCases: [string, unknown, string][] = [
    ['bad settleWithin', { policy: 'tokens', key: 'k', settleWithin: 'soon' }, 'invalid_duration'],
    ['maxWaitMs is not a reserve field', { policy: 'tokens', key: 'k', maxWaitMs: 1 }, 'unknown_field'],
    ['zero cost', { policy: 'tokens', key: 'k', cost: 0 }, 'invalid_cost'],
  ]
  it('each is a 400 with a stable code, and nothing is stored', async () => {
    const { url } = await start(YAML)
    for (const [path, cases] of [
      ['/v1/wait', waitCases],
      ['/v1/reserve', reserveCases],
    ] as const) {
      for (const [name, body, code] of cases) {
        const res = await post(`${url}${path}`, body)
        expect({ path, name, status: res.status, error: res.body.error }).toEqual({
          path,
          name,
          status: 400,
          error: code,
        })
      }
    }
    expect(await remaining(url, 'tokens', 'k')).toBe(100)
    const r = await post(`${url}/v1/reserve`, { policy: 'tokens', key: 'k', cost: 10 })
    const id = r.body.reservation as string
    for (const [body, code] of [
      [{ actual: -5 }, 'invalid_cost'],
      [{ actual: 1e300 }, 'invalid_cost'],
      [{ actual: '50' }, 'invalid_cost'],
      [{ actual: 5, extra: true }, 'unknown_field'],
      [[5], 'invalid_body'],
    ] as const) {
      const res = await post(`${url}/v1/settle/${id}`, body)
      expect({ body, status: res.status, error: res.body.error }).toEqual({ body, status: 400, error: code })
    }
    // Still open and still only the estimate charged: the bad settles changed nothing.
    expect(await remaining(url, 'tokens', 'k')).toBe(90)
    // Unknown, malformed and path-trick ids are 404s; a GET is a 405.
    for (const bad of ['00000000-0000-4000-8000-000000000000', 'x', `${id}/..`, `${id.toUpperCase()}`]) {
      const res = await post(`${url}/v1/settle/${bad}`, { actual: 1 })
      expect({ bad, status: res.status, error: res.body.error }).toEqual({
        bad,
        status: 404,
        error: 'unknown_reservation',
      })
    }
    expect((await fetch(`${url}/v1/settle/${id}`)).status).toBe(405)
    expect((await post(`${url}/v1/settle/${id}`, { actual: 10 })).status).toBe(200)
  })
})

describe('long polls are bounded', () => {
  it('a client that hangs up mid-wait leaves the queue: the next waiter gets the unit at once', async () => {
    const { url } = await start(YAML)
    await post(`${url}/v1/check`, { policy: 'api', key: 'k' })
    // A raw request that is dropped after 100 ms, while the service holds it.
    const dropped = new Promise<void>((resolve) => {
      const req = request(`${url}/v1/wait`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
      })
      req.on('error', () => resolve())
      req.end(JSON.stringify({ policy: 'api', key: 'k', maxWaitMs: 2_000 }))
      setTimeout(() => {
        req.destroy()
        resolve()
      }, 100)
    })
    // It only fits if it gets the unit freed at 400 ms: the one after comes at 800 ms, past its wait.
    const next = post(`${url}/v1/wait`, { policy: 'api', key: 'k', maxWaitMs: 600 })
    await dropped
    const res = await next
    expect(res.body.allowed).toBe(true)
    // The dropped waiter took nothing: the unit went to the one who stayed, and the key is spent.
    expect(await remaining(url, 'api', 'k')).toBe(0)
  })

  it('a flood of 300 waiters on one key: past waiting.maxWaitersPerKey the service answers 503 too_many_waiters', {
    timeout: 20_000,
  }, async () => {
    const { url } = await start(`
policies:
  api: { algorithm: fixed-window, limit: 1, window: 1m }
waiting: { maxWait: 2s }
`)
    await post(`${url}/v1/check`, { policy: 'api', key: 'k' })
    // A window of a minute passes maxWait: every waiter is refused up front without holding a place.
    const quick = await post(`${url}/v1/wait`, { policy: 'api', key: 'k' })
    expect(quick.body).toMatchObject({ allowed: false, reason: 'timeout' })
    const { url: other } = await start(`
policies:
  api: { algorithm: concurrency, limit: 1, timeout: 1m }
waiting: { maxWait: 3s, maxWaitersPerKey: 100 }
`)
    // Concurrency waiters hold their place until the deadline (a release may come): the bound bites.
    await post(`${other}/v1/check`, { policy: 'api', key: 'k' })
    const statuses = await Promise.all(
      Array.from({ length: 300 }, () =>
        post(`${other}/v1/wait`, { policy: 'api', key: 'k' }).then(
          (r) => `${r.status} ${r.body.error ?? r.body.reason}`,
        ),
      ),
    )
    const counts: Record<string, number> = {}
    for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1
    expect(counts, JSON.stringify(counts)).toHaveProperty('503 too_many_waiters')
    expect(counts['503 too_many_waiters']).toBeGreaterThanOrEqual(150)
    expect((counts['200 timeout'] ?? 0) + (counts['503 too_many_waiters'] ?? 0)).toBe(300)
  })
})
