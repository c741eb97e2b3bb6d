// Side by side with express-rate-limit: one Express app limited by express-rate-limit, one by
// Sluice's Express middleware set up the way docs/http.md tells its users to (fixed window, 100 per
// 15 minutes, the matching `headers` mode), the same requests to both, the same answers: header names
// and values, status and body. Reset seconds may differ by the time between the two apps' requests.
import express from 'express'
import { rateLimit } from 'express-rate-limit'
import { type Item, parseList } from 'structured-headers'
import { afterEach, describe, expect, it } from 'vitest'
import { sluice } from '../../packages/sluice/src/adapters/express.js'
import type { HttpLimiterOptions } from '../../packages/sluice/src/http/index.js'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { appServers, call, type Reply } from './servers.js'

type Mode = 'draft-6' | 'draft-7' | 'draft-8'

/** express-rate-limit's name for a 100 per 15 minutes limit in draft-8 (its default `identifier`). */
const POLICY = '100-in-15min'

const { serve, closeAll } = appServers()
afterEach(closeAll)

function peerApp(mode: Mode): express.Express {
  const app = express()
  app.use(rateLimit({ windowMs: 15 * 60 * 1000, limit: 100, standardHeaders: mode, legacyHeaders: false }))
  app.get('/', (_req, res) => res.send('hello'))
  return app
}

function sluiceApp(mode: Mode, extra: Partial<HttpLimiterOptions> = {}): express.Express {
  const limiter = createLimiter({
    policies: { [POLICY]: { algorithm: 'fixed-window', limit: 100, window: '15m' } },
  })
  const app = express()
  app.use(sluice({ limiter, rules: [{ policy: POLICY, key: 'ip' }], headers: mode, ...extra }))
  app.get('/', (_req, res) => res.send('hello'))
  return app
}

/** The rate-limit headers of a reply, by lower-case name. */
function limitHeaders(reply: Reply): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(reply.headers))
    if (/^(ratelimit|x-ratelimit|retry-after)/.test(name)) out[name] = String(value)
  return out
}

/** Every number in a header value that names seconds until the reset, with the rest of the text. */
const RESET_NUMBERS: Record<string, RegExp> = {
  'ratelimit-reset': /^(\d+)$/,
  ratelimit: /(?:reset=|t=)(\d+)/,
  'retry-after': /^(\d+)$/,
}

/** Parameters of every item of a Structured Field list, by item name, `pk` left out. */
function itemsOf(field: string | undefined): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {}
  for (const [name, params] of parseList(field ?? '') as Item[]) {
    const rest = Object.fromEntries([...params].filter(([key]) => key !== 'pk'))
    out[String(name)] = rest
  }
  return out
}

/** Both replies say the same, except reset seconds within `slackSeconds` of each other. */
function expectSameAnswer(peer: Reply, ours: Reply, mode: Mode, slackSeconds: number, what: string): void {
  expect(ours.status, what).toBe(peer.status)
  expect(ours.body, what).toBe(peer.body)
  const theirs = limitHeaders(peer)
  const mine = limitHeaders(ours)
  expect(Object.keys(theirs).length, what).toBeGreaterThan(0)
  expect(Object.keys(mine).sort(), what).toEqual(Object.keys(theirs).sort())
  for (const [name, value] of Object.entries(theirs)) {
    let expected = value
    let actual = mine[name]!
    if (mode === 'draft-8' && (name === 'ratelimit' || name === 'ratelimit-policy')) {
      // Sluice leaves out `pk` (a hash of the client's address) and writes no space after `;`,
      // both allowed by RFC 8941; the parsed fields must be equal.
      const theirItems = itemsOf(expected)
      const myItems = itemsOf(actual)
      const resetOf = (items: Record<string, Record<string, unknown>>): number =>
        Number(items[POLICY]?.t ?? 0)
      if (name === 'ratelimit') {
        expect(Math.abs(resetOf(myItems) - resetOf(theirItems)), `${what}: ${name}`).toBeLessThanOrEqual(
          slackSeconds,
        )
        myItems[POLICY]!.t = theirItems[POLICY]!.t
      }
      expect(myItems, `${what}: ${name}`).toEqual(theirItems)
      continue
    }
    const pattern = RESET_NUMBERS[name]
    if (pattern !== undefined) {
      const theirReset = Number(pattern.exec(expected)?.[1])
      const myReset = Number(pattern.exec(actual)?.[1])
      expect(Number.isInteger(myReset), `${what}: ${name}: ${actual}`).toBe(true)
      expect(Math.abs(myReset - theirReset), `${what}: ${name}`).toBeLessThanOrEqual(slackSeconds)
      expected = expected.replace(pattern, (match, n: string) => match.replace(n, 'N'))
      actual = actual.replace(pattern, (match, n: string) => match.replace(n, 'N'))
    }
    expect(actual, `${what}: ${name}`).toBe(expected)
  }
}

describe('Sluice next to express-rate-limit (fixed window, 100 per 15 minutes)', () => {
  for (const mode of ['draft-6', 'draft-7', 'draft-8'] as const) {
    it(`sends the same ${mode} headers and status on every request, to the 429`, async () => {
      const peer = await serve(peerApp(mode))
      // express-rate-limit's default refusal, as Sluice's shorthand.
      const ours = await serve(sluiceApp(mode, { message: 'Too many requests, please try again later.' }))
      const firstAt = Date.now()
      const firstPeer = await call(peer, '/')
      const firstOurs = await call(ours, '/')
      // The two windows open this far apart, so their reset seconds may differ by that much.
      const slack = Math.ceil((Date.now() - firstAt) / 1000) + 1
      expect(firstPeer.status).toBe(200)
      expectSameAnswer(firstPeer, firstOurs, mode, slack, 'request 1')
      for (let i = 2; i <= 101; i++) {
        const theirs = await call(peer, '/')
        const mine = await call(ours, '/')
        expect(theirs.status, `request ${i}`).toBe(i <= 100 ? 200 : 429)
        expectSameAnswer(theirs, mine, mode, slack, `request ${i}`)
      }
    })
  }
})
