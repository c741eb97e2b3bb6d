// The summary table of `npm run bench` (bench/summary.ts): issue 27's rows filled from rows by id,
// each goal checked both ways, and "not run" where a case did not run. No benchmark runs here.
import { describe, expect, it } from 'vitest'
import { summaryTable } from '../../bench/summary.js'
import type { BenchRow } from '../../bench/types.js'

const row = (id: string, value: number, ratio?: number): BenchRow => ({
  id,
  subject: id,
  metric: '',
  value,
  unit: '',
  ...(ratio === undefined ? {} : { ratio }),
})

function http(framework: string, variant: string, cpu: number, added: number, ratio: number): BenchRow[] {
  const id = `http-${framework}/${variant}`
  return [row(`${id} req/s`, 1000, ratio), row(`${id} cpu`, cpu), row(`${id} cpu-added`, added)]
}

const bytes = (subject: string, value: number, twice = false) =>
  row(`redis-memory/${subject} bytes-per-key${twice ? ' twice' : ''}`, value)

/** A run in which every goal is met. */
const metRun: BenchRow[] = [
  ...http('fastify', 'sluice-memory', 15, 1.2, 0.96),
  ...http('fastify', 'sluice-memory-legacy', 14.5, 0.8, 0.97),
  ...http('fastify', 'fastify-rate-limit-memory', 16, 1.7, 0.95),
  ...http('fastify', 'header-lines-5', 14.9, 0.9, 0.97),
  ...http('fastify', 'header-lines-3', 14.3, 0.3, 0.99),
  ...http('fastify', 'sluice-redis', 23.1, 11, 0.51),
  ...http('fastify', 'fastify-rate-limit-redis', 23.5, 8, 0.48),
  ...http('express', 'sluice-memory', 88, 3, 0.87),
  ...http('express', 'express-rate-limit-memory', 92.6, 5, 0.82),
  ...http('express', 'sluice-redis', 90, 10, 0.71),
  ...http('express', 'rate-limiter-flexible-redis', 94.9, 12, 0.79),
  ...http('express', 'express-rate-limit-redis', 98.8, 14, 0.7),
  row('redis/sluice node-cpu@64', 12),
  row('redis/rate-limiter-flexible node-cpu@64', 29.2),
  row('redis/sluice redis-cpu@64', 9.5),
  row('redis/rate-limiter-flexible redis-cpu@64', 21.2),
  row('redis/sluice rate@64', 240_000, 2.1),
  row('redis/sluice-kept node-cpu@64', 13),
  row('redis/sluice-kept redis-cpu@64', 10.5),
  row('redis/sluice-kept rate@64', 230_000, 2.02),
  row('redis/rate-limiter-flexible rate@64', 114_000, 1),
  bytes('sluice-fixed-window', 106),
  bytes('sluice-sliding-window-counter', 118),
  bytes('sluice-token-bucket', 122),
  bytes('sluice-gcra', 90),
  bytes('rate-limiter-flexible', 122),
  bytes('rate-limit-redis', 106),
  bytes('sluice-fixed-window', 106, true),
  bytes('sluice-sliding-window-counter', 118, true),
  bytes('sluice-token-bucket', 121, true),
  bytes('sluice-gcra', 90, true),
  bytes('rate-limiter-flexible', 122, true),
  bytes('rate-limit-redis', 106, true),
  row('envoy/sluice-grpc cpu', 95),
  row('envoy/sluice-grpc rate', 9_800),
  row('envoy/bare-http2 cpu', 79),
  row('envoy/bare-http2 rate', 9_300),
  row('envoy/grpc-js-empty cpu', 184),
  row('envoy/h2-framing cpu', 6.5),
  row('envoy/sluice-v1-check rate', 9_100),
  row('memory/sluice-token-bucket-consume rate', 7_900_000, 3.4),
  row('memory/sluice-token-bucket-consume vs-erl', 0.84),
  row('memory/sluice-token-bucket-consume vs-erl-cpu', 0.9),
  row('memory/express-rate-limit-store rate', 9_400_000),
]

/** Each row's goal missed by a small margin, one id changed per row. */
const misses: Record<string, BenchRow[]> = {
  fastify: [row('http-fastify/sluice-memory cpu-added', 1.8)],
  'redis cpu': [row('redis/sluice node-cpu@64', 14.7)],
  'redis rate': [row('redis/sluice rate@64', 236_000, 1.99)],
  'redis rate, keys kept': [row('redis/sluice-kept rate@64', 226_000, 1.98)],
  'redis cpu, keys kept': [row('redis/sluice-kept node-cpu@64', 14.7)],
  'redis bytes': [bytes('sluice-token-bucket', 123)],
  'redis bytes, a second decision': [bytes('sluice-token-bucket', 138, true)],
  'envoy cpu': [row('envoy/sluice-grpc cpu', 103)],
  'envoy rate': [row('envoy/sluice-grpc rate', 9_000)],
  memory: [row('memory/sluice-token-bucket-consume vs-erl', 0.79)],
  'express memory': [row('http-express/sluice-memory cpu', 93)],
  'express redis': [row('http-express/sluice-redis cpu', 95)],
  'fastify redis': [row('http-fastify/sluice-redis cpu', 23.6)],
}
/** The summary row each miss lands in (0-based, in the order). */
const missRow: Record<string, number> = {
  fastify: 0,
  'redis cpu': 1,
  'redis rate': 2,
  'redis rate, keys kept': 2,
  'redis cpu, keys kept': 1,
  'redis bytes': 3,
  'redis bytes, a second decision': 3,
  'envoy cpu': 4,
  'envoy rate': 4,
  memory: 5,
  'express memory': 6,
  'express redis': 6,
  'fastify redis': 6,
}

/** `base` with the rows of `changed` replacing those of the same id. */
function withRows(base: readonly BenchRow[], changed: readonly BenchRow[]): BenchRow[] {
  const ids = new Set(changed.map((r) => r.id))
  return [...base.filter((r) => !ids.has(r.id)), ...changed]
}

const verdicts = (lines: string[]) => lines.slice(2).map((line) => line.split(' | ').at(-1))

describe('bench summary table', () => {
  it("has issue 27's rows, in its order, with its measures and goals", () => {
    const body = summaryTable(metRun).slice(2)
    expect(body.map((line) => line.split(' | ')[0])).toEqual([
      '| Fastify hello world + limiter, memory: server CPU added per request',
      "| Redis, 64 in flight, ioredis, token bucket: this process's CPU per decision",
      '| the same: decisions/s',
      "| Redis memory per key, 10k keys, the peers' 100 per minute, prefixes of equal length (used_memory delta)",
      '| Envoy `ShouldRateLimit` over gRPC (h2load, 4 connections x 16 streams): server CPU per call',
      '| `await limiter.consume`, memory store, 10k keys',
      '| Express + memory, Express + Redis, Fastify + Redis: server CPU per request',
    ])
    expect(body.map((line) => line.split(' | ')[3])).toEqual([
      "at most the peer's, with Sluice's default headers",
      "at most 0.5x rate-limiter-flexible's",
      'at least 2x',
      "at most rate-limiter-flexible's for every counting algorithm",
      "at most 1.3x the bare node:http2 handler's, and at least the decisions/s of `POST /v1/check` on the same server",
      'at least 0.8x',
      'stay at or below the best peer',
    ])
  })

  it('says met on every row when every goal is met, with the cells from the run', () => {
    const lines = summaryTable(metRun)
    expect(lines[0]).toBe('| measure | Sluice | peer / ceiling | goal | met? |')
    expect(verdicts(lines)).toEqual(Array(7).fill('met |'))
    const body = lines.slice(2)
    expect(body[0]).toContain('+1.2 µs (0.96x req/s of no limiter); X-RateLimit-* only +0.8 µs (0.97x)')
    expect(body[0]).toContain(
      "@fastify/rate-limit +1.7 µs (0.95x); no limiter, Sluice's five default header lines alone +0.9 µs (0.97x); no limiter, the three X-RateLimit-* lines alone +0.3 µs (0.99x) |",
    )
    expect(body[1]).toContain('12.0 µs, 0.41x (redis-server 9.5 µs)')
    expect(body[1]).toContain('rate-limiter-flexible 29.2 µs (redis-server 21.2 µs)')
    expect(body[1]).toContain('; keys kept between hits 13.0 µs, 0.45x (redis-server 10.5 µs) |')
    expect(body[2]).toContain('240.0k/s (2.10x rate-limiter-flexible)')
    expect(body[2]).toContain('; keys kept between hits 230.0k/s (2.02x) |')
    expect(body[3]).toContain(
      'fixed window 106 B, sliding window counter 118 B, token bucket 122 B, GCRA 90 B',
    )
    expect(body[3]).toContain('rate-limiter-flexible 122 B, rate-limit-redis 106 B')
    expect(body[3]).toContain(
      '; a second decision per key: fixed window 106 B, sliding window counter 118 B, token bucket 121 B, GCRA 90 B |',
    )
    expect(body[3]).toContain(
      '; a second decision per key: rate-limiter-flexible 122 B, rate-limit-redis 106 B |',
    )
    expect(body[4]).toContain("95.0 µs (1.20x the bare handler's), 9.8k/s calls (memory store)")
    expect(body[4]).toContain('an empty grpc-js server: 184.0 µs')
    expect(body[4]).toContain(
      'a bare `node:http2` handler: 79.0 µs, 9.3k/s calls; HTTP/2 framed by hand over node:net, without node:http2: 6.5 µs; `POST /v1/check`: 9.1k/s',
    )
    expect(body[5]).toContain(
      "7.90M/s, token bucket (0.84x express-rate-limit's `MemoryStore.increment`; per CPU second 0.90x)",
    )
    expect(body[6]).toContain('Express + Redis 90.0 µs (0.71x)')
    expect(body[6]).toContain(
      'Express + Redis: rate-limiter-flexible middleware 94.9 µs (0.79x), express-rate-limit + rate-limit-redis 98.8 µs (0.70x)',
    )
  })

  it.each(Object.keys(misses))('says missed on its row alone when the %s goal is missed', (name) => {
    const expected = Array(7).fill('met |')
    expected[missRow[name]!] = 'missed |'
    expect(verdicts(summaryTable(withRows(metRun, misses[name]!)))).toEqual(expected)
  })

  it('compares bytes per key in whole bytes, as printed', () => {
    const close = withRows(metRun, [
      bytes('sluice-token-bucket', 122.4),
      bytes('rate-limiter-flexible', 122.21),
    ])
    expect(verdicts(summaryTable(close))[3]).toBe('met |')
    const over = withRows(metRun, [
      bytes('sluice-token-bucket', 122.6),
      bytes('rate-limiter-flexible', 122.21),
    ])
    expect(verdicts(summaryTable(over))[3]).toBe('missed |')
  })

  it('puts the cores each Redis subject kept busy beside decisions/s, and the bound 2 cores set', () => {
    const line = summaryTable(metRun)[4]!
    // (12 + 9.5) µs x 240k/s and (29.2 + 21.2) µs x 114k/s; the bound is 50.4 / 21.5.
    expect(line).toContain(
      '(2.10x rate-limiter-flexible); 5.16 of 2 cores busy, the 2-core bound 2.34x; keys kept',
    )
    expect(line).toContain('rate-limiter-flexible 114.0k/s; 5.75 of 2 cores busy |')
  })

  it('reads the optional cells only when the run has them', () => {
    const optional = new Set([
      'http-fastify/sluice-memory-legacy cpu-added',
      'http-fastify/header-lines-5 cpu-added',
      'http-fastify/header-lines-3 cpu-added',
      'redis/sluice redis-cpu@64',
      'redis/sluice-kept redis-cpu@64',
      'envoy/grpc-js-empty cpu',
      'envoy/bare-http2 rate',
      'envoy/h2-framing cpu',
      'memory/sluice-token-bucket-consume vs-erl-cpu',
    ])
    const lines = summaryTable(metRun.filter((r) => !optional.has(r.id!)))
    expect(verdicts(lines)).toEqual(Array(7).fill('met |'))
    expect(lines[2]).not.toContain('X-RateLimit-* only')
    expect(lines[2]).not.toContain('header lines alone')
    expect(lines[3]).toContain('12.0 µs, 0.41x; keys kept between hits 13.0 µs, 0.45x |')
    expect(lines[4]).not.toContain('cores busy')
    expect(lines[6]).not.toContain('grpc-js')
    expect(lines[6]).not.toContain('framed by hand')
    expect(lines[6]).toContain('a bare `node:http2` handler: 79.0 µs; `POST')
    expect(lines[7]).not.toContain('per CPU second')
  })

  it("quotes express-rate-limit's store as the token bucket's own process measured it, when the run has that row", () => {
    const lines = summaryTable(
      withRows(metRun, [row('memory/express-rate-limit-store@token-bucket rate', 9_100_000)]),
    )
    expect(lines[7]).toContain('express-rate-limit `MemoryStore.increment` 9.10M/s')
    expect(summaryTable(metRun)[7]).toContain('express-rate-limit `MemoryStore.increment` 9.40M/s')
  })

  it("prints each process's own ratio, by order, beside the pooled one when the memory case ran several", () => {
    const pooled = {
      ...row('memory/sluice-token-bucket-consume vs-erl', 0.81),
      note: 'by process, Sluice first 0.9, 0.81; the store first 0.74',
    }
    const line = summaryTable(withRows(metRun, [pooled]))[7]!
    expect(line).toContain(
      "(0.81x express-rate-limit's `MemoryStore.increment`; per CPU second 0.90x; by process, Sluice first 0.9, 0.81; the store first 0.74)",
    )
    expect(line).toContain('| met |')
    expect(summaryTable(metRun)[7]).not.toContain('by process')
  })

  it('says "not run" for the rows of cases that did not run, and for NaN figures', () => {
    const withoutRedis = summaryTable(metRun.filter((r) => !r.id?.startsWith('redis/')))
    expect(verdicts(withoutRedis)).toEqual([
      'met |',
      'not run |',
      'not run |',
      'met |',
      'met |',
      'met |',
      'met |',
    ])
    expect(withoutRedis[3]).toContain('| not run | not run |')
    // One framework alone cannot fill the row that spans both.
    const fastifyOnly = summaryTable(metRun.filter((r) => !r.id?.startsWith('http-express/')))
    expect(verdicts(fastifyOnly).at(-1)).toBe('not run |')
    expect(verdicts(summaryTable(withRows(metRun, [row('envoy/bare-http2 cpu', Number.NaN)])))[4]).toBe(
      'not run |',
    )
    expect(verdicts(summaryTable([]))).toEqual(Array(7).fill('not run |'))
  })
})
