// Side by side with express-rate-limit's skipFailedRequests and skipSuccessfulRequests: one Express
// app limited by express-rate-limit, one by Sluice's Express middleware with the same options, the
// same requests to both (200s and 500s mixed, past the limit), the same status, body and draft-7
// headers on every reply. Reset seconds may differ by the time between the two apps' requests.
import express from 'express'
import { rateLimit } from 'express-rate-limit'
import { afterEach, describe, expect, it } from 'vitest'
import { sluice } from '../../packages/sluice/src/adapters/express.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { forwardStore, type Step } from '../../packages/sluice/src/store.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { appServers, call, type Reply } from './servers.js'

type Skip = { skipFailedRequests: true } | { skipSuccessfulRequests: true }

const MESSAGE = 'Too many requests, please try again later.'

const { serve, closeAll } = appServers()
afterEach(closeAll)

function routes(app: express.Express): express.Express {
  app.get('/ok', (_req, res) => res.send('ok'))
  app.get('/fail', (_req, res) => res.status(500).send('fail'))
  return app
}

function peerApp(skip: Skip): express.Express {
  const app = express()
  app.use(
    rateLimit({
      windowMs: 15 * 60 * 1000,
      limit: 4,
      standardHeaders: 'draft-7',
      legacyHeaders: false,
      ...skip,
    }),
  )
  return routes(app)
}

/** Sluice's app, and a promise of its `count`th refund reaching the store. */
function sluiceApp(skip: Skip): { app: express.Express; refunded: (count: number) => Promise<void> } {
  const inner = memoryStore()
  let refunds = 0
  let waiting: { count: number; resolve: () => void } | undefined
  const store = forwardStore(inner, {
    refund: async (steps: readonly Step[]) => {
      await inner.refund(steps)
      refunds += steps.length
      if (waiting !== undefined && refunds >= waiting.count) waiting.resolve()
    },
  })
  const limiter = createLimiter({
    store,
    policies: { '4-in-15min': { algorithm: 'fixed-window', limit: 4, window: '15m' } },
  })
  const app = express()
  app.use(
    sluice({
      limiter,
      rules: [{ policy: '4-in-15min', key: 'ip' }],
      headers: 'draft-7',
      message: MESSAGE,
      ...skip,
    }),
  )
  return {
    app: routes(app),
    refunded: (count) =>
      refunds >= count ? Promise.resolve() : new Promise((resolve) => (waiting = { count, resolve })),
  }
}

/** The draft-7 fields and Retry-After of a reply, reset seconds apart. */
function limitsOf(reply: Reply): { fields: string; reset: number; retryAfter: number | undefined } {
  const header = String(reply.headers.ratelimit ?? '')
  const reset = Number(/reset=(\d+)/.exec(header)?.[1])
  const retry = reply.headers['retry-after']
  return {
    fields: `${header.replace(/reset=\d+/, 'reset=N')} | ${String(reply.headers['ratelimit-policy'])}`,
    reset,
    retryAfter: retry === undefined ? undefined : Number(retry),
  }
}

const SEQUENCE = ['ok', 'fail', 'fail', 'ok', 'fail', 'ok', 'ok', 'fail', 'ok', 'fail', 'ok', 'ok', 'fail']

describe('Sluice next to express-rate-limit: skipping responses by outcome (4 per 15 minutes)', () => {
  for (const [name, skip, refundedBy] of [
    ['skipFailedRequests', { skipFailedRequests: true }, (status: number) => status === 500],
    ['skipSuccessfulRequests', { skipSuccessfulRequests: true }, (status: number) => status === 200],
  ] as const) {
    it(`${name}: the same status, body and draft-7 headers on every reply`, async () => {
      const peer = await serve(peerApp(skip))
      const ours = sluiceApp(skip)
      const mine = await serve(ours.app)
      const firstAt = Date.now()
      let slack = 1
      let refunds = 0
      const statuses: number[] = []
      for (const [i, path] of SEQUENCE.entries()) {
        const what = `request ${i + 1} (/${path})`
        const theirs = await call(peer, `/${path}`)
        const reply = await call(mine, `/${path}`)
        if (i === 0) slack = Math.ceil((Date.now() - firstAt) / 1000) + 1
        statuses.push(theirs.status)
        expect(reply.status, what).toBe(theirs.status)
        expect(reply.body, what).toBe(theirs.body)
        const a = limitsOf(theirs)
        const b = limitsOf(reply)
        expect(b.fields, what).toBe(a.fields)
        expect(Math.abs(a.reset - b.reset), what).toBeLessThanOrEqual(slack)
        expect(b.retryAfter === undefined, what).toBe(a.retryAfter === undefined)
        if (a.retryAfter !== undefined)
          expect(Math.abs(a.retryAfter - (b.retryAfter ?? 0)), what).toBeLessThanOrEqual(slack)
        if (refundedBy(reply.status)) await ours.refunded(++refunds)
      }
      // The sequence reaches the limit: some of each kind, and refusals.
      expect(statuses).toContain(429)
      expect(statuses).toContain(200)
      expect(statuses).toContain(500)
    })
  }
})
