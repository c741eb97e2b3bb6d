// The summary table printed at the end of `npm run bench`: one row per measure that has a goal
// (measure, Sluice, peer, goal, met?), filled from the rows of this one run by their `id`.
import type { BenchRow } from './types.js'

interface SummaryRow {
  measure: string
  goal: string
  /** Cells from this run's rows; `get` throws when a row it needs was not run. */
  fill(get: (id: string) => BenchRow): { sluice: string; peer: string; met: boolean }
}

const us = (n: number) => `${n.toFixed(1)} µs`
const plusUs = (n: number) => `${n >= 0 ? '+' : ''}${n.toFixed(1)} µs`
const x = (n: number | undefined) => `${(n ?? Number.NaN).toFixed(2)}x`
function rate(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)}M/s`
  if (n >= 1e3) return `${(n / 1e3).toFixed(0)}k/s`
  return `${n.toFixed(0)}/s`
}

/**
 * "<cpu> (<req/s ratio>x)" of an HTTP subject; `added` shows the CPU over no limiter instead, and
 * `label` follows the ratio inside the parentheses.
 */
function http(
  get: (id: string) => BenchRow,
  id: string,
  { added = false, label = '' } = {},
): { cpu: number; text: string } {
  const cpu = get(`${id} ${added ? 'cpu-added' : 'cpu'}`).value
  const ratio = get(`${id} req/s`).ratio
  return { cpu, text: `${added ? plusUs(cpu) : us(cpu)} (${x(ratio)}${label})` }
}

export const SUMMARY: SummaryRow[] = [
  {
    measure: 'Fastify hello world + limiter, memory: server CPU added per request',
    goal: "at most the peer's",
    fill(get) {
      const s = http(get, 'http-fastify/sluice-memory', { added: true, label: ' req/s of no limiter' })
      const p = http(get, 'http-fastify/fastify-rate-limit-memory', { added: true })
      return {
        sluice: s.text,
        peer: `@fastify/rate-limit ${p.text}`,
        met: s.cpu <= p.cpu,
      }
    },
  },
  {
    measure: 'Fastify + limiter on Redis (ioredis): server CPU per request',
    goal: "at most the peer's",
    fill(get) {
      const s = http(get, 'http-fastify/sluice-redis')
      const p = http(get, 'http-fastify/fastify-rate-limit-redis')
      return { sluice: s.text, peer: `@fastify/rate-limit ${p.text}`, met: s.cpu <= p.cpu }
    },
  },
  {
    measure: 'Express + limiter on Redis: server CPU per request',
    goal: "at most the best peer's",
    fill(get) {
      const s = http(get, 'http-express/sluice-redis')
      const rlf = http(get, 'http-express/rate-limiter-flexible-redis')
      const erl = http(get, 'http-express/express-rate-limit-redis')
      return {
        sluice: s.text,
        peer: `rate-limiter-flexible middleware ${rlf.text}, express-rate-limit + rate-limit-redis ${erl.text}`,
        met: s.cpu <= Math.min(rlf.cpu, erl.cpu),
      }
    },
  },
  {
    measure: 'Express + limiter, memory: server CPU per request',
    goal: 'keep ahead',
    fill(get) {
      const s = http(get, 'http-express/sluice-memory')
      const p = http(get, 'http-express/express-rate-limit-memory')
      return { sluice: s.text, peer: `express-rate-limit ${p.text}`, met: s.cpu < p.cpu }
    },
  },
  {
    measure: '`await limiter.consume` on the memory store, 10k keys (token bucket)',
    goal: ">= 3x rate-limiter-flexible and >= 0.8x express-rate-limit's store",
    fill(get) {
      const s = get('memory/sluice-token-bucket-consume rate')
      const vsErl = get('memory/sluice-token-bucket-consume vs-erl').value
      const rlf = get('memory/rate-limiter-flexible rate').value
      const erl = get('memory/express-rate-limit-store rate').value
      const map = get('memory/awaited-map rate').value
      return {
        sluice: `${rate(s.value)} (${x(s.ratio)} RLF, ${x(vsErl)} express-rate-limit's store)`,
        peer: `rate-limiter-flexible ${rate(rlf)}; express-rate-limit MemoryStore.increment ${rate(erl)}; awaited plain Map ${rate(map)}`,
        met: (s.ratio ?? 0) >= 3 && vsErl >= 0.8,
      }
    },
  },
  {
    measure: 'Redis, 64 in flight, ioredis (token bucket)',
    goal: '>= 2x rate-limiter-flexible',
    fill(get) {
      const s = get('redis/sluice rate@64')
      return {
        sluice: `${rate(s.value)} (${x(s.ratio)} RLF)`,
        peer: `rate-limiter-flexible ${rate(get('redis/rate-limiter-flexible rate@64').value)}; bare EVALSHA ${rate(get('redis/bare-evalsha rate@64').value)}; redis-benchmark EVALSHA -P16 ${rate(get('redis/redis-benchmark rate@64').value)}`,
        met: (s.ratio ?? 0) >= 2,
      }
    },
  },
  {
    measure: 'Redis, 1 in flight, p50',
    goal: "at most the peer's",
    fill(get) {
      const s = get('redis/sluice p50@1').value
      const p = get('redis/rate-limiter-flexible p50@1').value
      return { sluice: `${s.toFixed(0)} µs`, peer: `rate-limiter-flexible ${p.toFixed(0)} µs`, met: s <= p }
    },
  },
]

class Missing extends Error {}

/** The summary as Markdown lines; a row whose inputs this run did not produce says "not run". */
export function summaryTable(rows: readonly BenchRow[]): string[] {
  const byId = new Map<string, BenchRow>()
  for (const row of rows) if (row.id !== undefined) byId.set(row.id, row)
  const get = (id: string) => {
    const row = byId.get(id)
    if (row === undefined || Number.isNaN(row.value)) throw new Missing(id)
    return row
  }
  const lines = ['| measure | Sluice | peer | goal | met? |', '| --- | --- | --- | --- | --- |']
  for (const r of SUMMARY) {
    try {
      const cells = r.fill(get)
      lines.push(
        `| ${r.measure} | ${cells.sluice} | ${cells.peer} | ${r.goal} | ${cells.met ? 'yes' : 'no'} |`,
      )
    } catch (error) {
      if (!(error instanceof Missing)) throw error
      lines.push(`| ${r.measure} | not run | not run | ${r.goal} | n/a |`)
    }
  }
  return lines
}
