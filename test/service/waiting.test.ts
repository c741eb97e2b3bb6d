// The service's waiting endpoints through real sockets: POST /v1/wait (long poll, capped by
// waiting.maxWait), POST /v1/reserve and POST /v1/settle/{id}.
import { describe, expect, it } from 'vitest'
import { post, servicesClosedAfterEach } from '../helpers/service.js'

const start = servicesClosedAfterEach()

const CONFIG = `
policies:
  api:    { algorithm: fixed-window, limit: 2, window: 300ms }
  slow:   { algorithm: fixed-window, limit: 1, window: 1m }
  tokens: { algorithm: fixed-window, limit: 10000, window: 1m }
  org:    { algorithm: fixed-window, limit: 50000, window: 1m }
waiting: { maxWait: 10s, maxReservations: 3 }
`

describe('POST /v1/wait', () => {
  it('holds the request until it fits and answers the decision', async () => {
    const { url } = await start(CONFIG)
    const started = performance.now()
    const answers = await Promise.all(
      Array.from({ length: 4 }, () => post(`${url}/v1/wait`, { policy: 'api', key: 'k', maxWaitMs: 900 })),
    )
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200])
    expect(answers.map((a) => a.body.allowed)).toEqual([true, true, true, true])
    expect(performance.now() - started).toBeGreaterThanOrEqual(280)
    expect(answers[0]!.body).toMatchObject({ policy: 'api', limit: 2 })
  })

  it("caps maxWaitMs by waiting.maxWait: a wait beyond it is refused at once with reason 'timeout'", async () => {
    const { url } = await start(CONFIG)
    await post(`${url}/v1/check`, { policy: 'slow', key: 'k' })
    const started = performance.now()
    const res = await post(`${url}/v1/wait`, { policy: 'slow', key: 'k', maxWaitMs: 3_600_000 })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ allowed: false, reason: 'timeout', policy: 'slow' })
    // At once: a wait to the cap would take its 10 s; half of that leaves a slow machine room.
    expect(performance.now() - started).toBeLessThan(5_000)
  })

  it('takes layered checks', async () => {
    const { url } = await start(CONFIG)
    const res = await post(`${url}/v1/wait`, {
      checks: [
        { policy: 'api', key: 'k' },
        { policy: 'tokens', key: 't', cost: 5 },
      ],
    })
    expect(res.body).toMatchObject({ allowed: true })
    expect((res.body.results as unknown[]).length).toBe(2)
  })
})

describe('POST /v1/reserve and /v1/settle/{id}', () => {
  it('reserves an estimate, settles the true cost (refund below, charge above), once', async () => {
    const { url } = await start(CONFIG)
    const r = await post(`${url}/v1/reserve`, { policy: 'tokens', key: 't', cost: 2_000 })
    expect(r.status).toBe(200)
    expect(r.body).toMatchObject({ allowed: true, remaining: 8_000, reservation: expect.any(String) })
    const s = await post(`${url}/v1/settle/${r.body.reservation}`, { actual: 500 })
    expect(s.status).toBe(200)
    expect(s.body).toMatchObject({ settled: true, actual: 500, estimate: 2_000 })
    const peek = await post(`${url}/v1/peek`, { policy: 'tokens', key: 't' })
    expect(peek.body.remaining).toBe(9_500)
    const again = await post(`${url}/v1/settle/${r.body.reservation}`, { actual: 500 })
    expect(again).toMatchObject({ status: 409, body: { error: 'reservation_settled' } })

    const big = await post(`${url}/v1/reserve`, { policy: 'tokens', key: 't', cost: 9_000 })
    await post(`${url}/v1/settle/${big.body.reservation}`, { actual: 12_000 })
    const after = await post(`${url}/v1/check`, { policy: 'tokens', key: 't' })
    expect(after.body).toMatchObject({ allowed: false, remaining: 0 })
  })

  it('settles every layer; an expired reservation answers 410 and keeps its estimate', async () => {
    const { url } = await start(CONFIG)
    const r = await post(`${url}/v1/reserve`, {
      checks: [
        { policy: 'tokens', key: 'u', cost: 100 },
        { policy: 'org', key: 'acme', cost: 100 },
      ],
    })
    expect(r.body.allowed).toBe(true)
    expect((await post(`${url}/v1/settle/${r.body.reservation}`, { actual: 300 })).status).toBe(200)
    expect((await post(`${url}/v1/peek`, { policy: 'org', key: 'acme' })).body.remaining).toBe(49_700)
    const late = await post(`${url}/v1/reserve`, { policy: 'tokens', key: 'v', cost: 100, settleWithin: 30 })
    await new Promise((resolve) => setTimeout(resolve, 60))
    const s = await post(`${url}/v1/settle/${late.body.reservation}`, { actual: 1 })
    expect(s).toMatchObject({ status: 410, body: { error: 'reservation_expired' } })
    expect((await post(`${url}/v1/peek`, { policy: 'tokens', key: 'v' })).body.remaining).toBe(9_900)
  })

  it('bounds open reservations by waiting.maxReservations (503), and a denied one gets no id', async () => {
    const { url } = await start(CONFIG)
    for (let i = 0; i < 3; i++)
      expect((await post(`${url}/v1/reserve`, { policy: 'tokens', key: `k${i}` })).status).toBe(200)
    const over = await post(`${url}/v1/reserve`, { policy: 'tokens', key: 'k9' })
    expect(over).toMatchObject({ status: 503, body: { error: 'too_many_reservations' } })
    // Nothing was charged for the refused one.
    expect((await post(`${url}/v1/peek`, { policy: 'tokens', key: 'k9' })).body.remaining).toBe(10_000)
    const { url: other } = await start(CONFIG)
    await post(`${other}/v1/check`, { policy: 'slow', key: 'k' })
    const denied = await post(`${other}/v1/reserve`, { policy: 'slow', key: 'k' })
    expect(denied.body).toMatchObject({ allowed: false })
    expect(denied.body.reservation).toBeUndefined()
  })
})
