// The summary table of `npm run bench` (bench/summary.ts): every goal row filled from rows by
// id, the goal checked, and "not run" where a case did not run. No benchmark runs here.
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

const fullRun: BenchRow[] = [
  ...http('fastify', 'sluice-memory', 15, 3.2, 0.76),
  ...http('fastify', 'fastify-rate-limit-memory', 14, 1.7, 0.85),
  ...http('fastify', 'sluice-redis', 23.1, 11, 0.41),
  ...http('fastify', 'fastify-rate-limit-redis', 19.8, 8, 0.48),
  ...http('express', 'sluice-redis', 90, 10, 0.71),
  ...http('express', 'rate-limiter-flexible-redis', 94.9, 12, 0.79),
  ...http('express', 'express-rate-limit-redis', 98.8, 14, 0.7),
  ...http('express', 'sluice-memory', 88, 3, 0.87),
  ...http('express', 'express-rate-limit-memory', 92.6, 5, 0.82),
  row('memory/sluice-token-bucket-consume rate', 3_900_000, 1.34),
  row('memory/sluice-token-bucket-consume vs-erl', 0.41),
  row('memory/rate-limiter-flexible rate', 2_900_000, 1),
  row('memory/express-rate-limit-store rate', 9_400_000),
  row('memory/awaited-map rate', 10_900_000),
  row('redis/sluice rate@64', 236_000, 2.1),
  row('redis/rate-limiter-flexible rate@64', 162_000, 1),
  row('redis/bare-evalsha rate@64', 183_000),
  row('redis/redis-benchmark rate@64', 205_000),
  row('redis/sluice p50@1', 85),
  row('redis/rate-limiter-flexible p50@1', 80),
]

describe('bench summary table', () => {
  it("has the issue's columns and one line per row, each goal checked against this run", () => {
    const lines = summaryTable(fullRun)
    expect(lines[0]).toBe('| measure | Sluice | peer | goal | met? |')
    const body = lines.slice(2)
    expect(body).toHaveLength(7)
    const met = body.map((line) => line.split(' | ').at(-1))
    expect(met).toEqual(['no |', 'no |', 'yes |', 'yes |', 'no |', 'yes |', 'no |'])
    expect(body[0]).toContain('+3.2 µs (0.76x req/s of no limiter)')
    expect(body[0]).toContain('@fastify/rate-limit +1.7 µs (0.85x)')
    expect(body[4]).toContain('3.90M/s (1.34x RLF, 0.41x')
    expect(body[5]).toContain('redis-benchmark EVALSHA -P16 205k/s')
  })

  it('says "not run" for the rows of cases that did not run', () => {
    const lines = summaryTable(fullRun.filter((r) => !r.id?.startsWith('redis/')))
    expect(lines.slice(2).filter((line) => line.includes('| not run | not run |'))).toHaveLength(2)
    expect(
      summaryTable([])
        .slice(2)
        .every((line) => line.endsWith('| n/a |')),
    ).toBe(true)
  })
})
