// The summary table printed at the end of `npm run bench`: issue 27's table, one row per measure
// (measure, Sluice, peer / ceiling, goal, met?), every cell filled from the rows of this one run by
// their `id`. A row whose inputs this run did not produce says "not run".
import type { BenchRow } from './types.js'

/** How a summary row reads this run: `get` throws when a row it needs was not run; `has` asks. */
interface Run {
  get(id: string): BenchRow
  has(id: string): boolean
}

interface SummaryRow {
  measure: string
  goal: string
  fill(run: Run): { sluice: string; peer: string; met: boolean }
}

const us = (n: number) => `${n.toFixed(1)} µs`
const plusUs = (n: number) => `${n >= 0 ? '+' : ''}${n.toFixed(1)} µs`
const x = (n: number | undefined) => `${(n ?? Number.NaN).toFixed(2)}x`
const bytes = (n: number) => `${n.toFixed(0)} B`
function rate(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)}M/s`
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)}k/s`
  return `${n.toFixed(0)}/s`
}

/**
 * An HTTP server's CPU per request (`added`: over the no-limiter server) and its req/s ratio to no
 * limiter; `label` follows the ratio inside the parentheses.
 */
function http(run: Run, id: string, added = false, label = ''): { cpu: number; text: string } {
  const cpu = run.get(`${id} ${added ? 'cpu-added' : 'cpu'}`).value
  const ratio = run.get(`${id} req/s`).ratio
  return { cpu, text: `${added ? plusUs(cpu) : us(cpu)} (${x(ratio)}${label})` }
}

/** The lowest CPU per request of the peers named, as "name cpu (ratio)" cells and the lowest figure. */
function bestPeer(run: Run, peers: readonly [string, string][]): { cpu: number; text: string } {
  const measured = peers.map(([id, name]) => ({ name, ...http(run, id) }))
  return {
    cpu: Math.min(...measured.map((p) => p.cpu)),
    text: measured.map((p) => `${p.name} ${p.text}`).join(', '),
  }
}

/** The Redis memory rows (`redis-memory` case): Sluice's algorithms and the peers, bytes per key. */
const REDIS_ALGORITHMS: readonly [string, string][] = [
  ['fixed-window', 'fixed window'],
  ['sliding-window-counter', 'sliding window counter'],
  ['token-bucket', 'token bucket'],
  ['gcra', 'GCRA'],
]
/**
 * The Redis case's second Sluice subject: a bucket that refills slower than the loop comes back, so
 * each decision reads its key's state back instead of starting a new key. Both must meet a goal.
 */
const KEPT = 'keys kept between hits'
/** The `redis-memory` case's second measure: each key given a second decision 2 ms after its first. */
const SECOND = 'a second decision per key:'
const bytesPerKey = (run: Run, subject: string, twice: boolean) =>
  run.get(`redis-memory/${subject} bytes-per-key${twice ? ' twice' : ''}`).value

/** The same-process Express and Fastify rows that must stay at or below the best peer's. */
const STAY_AHEAD: readonly { label: string; sluice: string; peers: [string, string][] }[] = [
  {
    label: 'Express + memory',
    sluice: 'http-express/sluice-memory',
    peers: [['http-express/express-rate-limit-memory', 'express-rate-limit']],
  },
  {
    label: 'Express + Redis',
    sluice: 'http-express/sluice-redis',
    peers: [
      ['http-express/rate-limiter-flexible-redis', 'rate-limiter-flexible middleware'],
      ['http-express/express-rate-limit-redis', 'express-rate-limit + rate-limit-redis'],
    ],
  },
  {
    label: 'Fastify + Redis',
    sluice: 'http-fastify/sluice-redis',
    peers: [['http-fastify/fastify-rate-limit-redis', '@fastify/rate-limit']],
  },
]

export const SUMMARY: SummaryRow[] = [
  {
    measure: 'Fastify hello world + limiter, memory: server CPU added per request',
    goal: "at most the peer's, with Sluice's default headers",
    fill(run) {
      const s = http(run, 'http-fastify/sluice-memory', true, ' req/s of no limiter')
      const p = http(run, 'http-fastify/fastify-rate-limit-memory', true)
      // Servers the run may have: Sluice with the peer's header set, and no limiter but a hook
      // writing fixed header lines (what the lines alone cost).
      const optional = (variant: string, label: string) => {
        const id = `http-fastify/${variant}`
        return run.has(`${id} cpu-added`) ? `; ${label} ${http(run, id, true).text}` : ''
      }
      return {
        sluice: `${s.text}${optional('sluice-memory-legacy', 'X-RateLimit-* only')}`,
        peer: `@fastify/rate-limit ${p.text}${optional('header-lines-5', "no limiter, Sluice's five default header lines alone")}${optional('header-lines-3', 'no limiter, the three X-RateLimit-* lines alone')}`,
        met: s.cpu <= p.cpu,
      }
    },
  },
  {
    measure: "Redis, 64 in flight, ioredis, token bucket: this process's CPU per decision",
    goal: "at most 0.5x rate-limiter-flexible's",
    fill(run) {
      const s = run.get('redis/sluice node-cpu@64').value
      const kept = run.get('redis/sluice-kept node-cpu@64').value
      const p = run.get('redis/rate-limiter-flexible node-cpu@64').value
      const server = (subject: string) =>
        run.has(`redis/${subject} redis-cpu@64`)
          ? ` (redis-server ${us(run.get(`redis/${subject} redis-cpu@64`).value)})`
          : ''
      return {
        sluice:
          `${us(s)}, ${x(s / p)}${server('sluice')}; ` +
          `${KEPT} ${us(kept)}, ${x(kept / p)}${server('sluice-kept')}`,
        peer: `rate-limiter-flexible ${us(p)}${server('rate-limiter-flexible')}`,
        met: Math.max(s, kept) <= 0.5 * p,
      }
    },
  },
  {
    measure: 'the same: decisions/s',
    goal: 'at least 2x',
    fill(run) {
      const s = run.get('redis/sluice rate@64')
      const kept = run.get('redis/sluice-kept rate@64')
      const p = run.get('redis/rate-limiter-flexible rate@64').value
      // Both processes share 2 cores: the sum of their CPU per decision bounds decisions/s, and the
      // cores each subject kept busy say how much of that bound the run reached.
      const cpu = (subject: string) =>
        run.has(`redis/${subject} redis-cpu@64`)
          ? run.get(`redis/${subject} node-cpu@64`).value + run.get(`redis/${subject} redis-cpu@64`).value
          : undefined
      const [sCpu, pCpu] = [cpu('sluice'), cpu('rate-limiter-flexible')]
      const busy = (r: number, us: number) => `${((r * us) / 1e6).toFixed(2)} of 2 cores busy`
      const known = sCpu !== undefined && pCpu !== undefined
      return {
        sluice:
          `${rate(s.value)} (${x(s.ratio)} rate-limiter-flexible)` +
          (known ? `; ${busy(s.value, sCpu)}, the 2-core bound ${x(pCpu / sCpu)}` : '') +
          `; ${KEPT} ${rate(kept.value)} (${x(kept.ratio)})`,
        peer: `rate-limiter-flexible ${rate(p)}${known ? `; ${busy(p, pCpu)}` : ''}`,
        met: Math.min(s.ratio ?? 0, kept.ratio ?? 0) >= 2,
      }
    },
  },
  {
    measure:
      "Redis memory per key, 10k keys, the peers' 100 per minute, prefixes of equal length (used_memory delta)",
    goal: "at most rate-limiter-flexible's for every counting algorithm",
    fill(run) {
      // After one decision per key, then after a second one (the state of a key read back).
      const [once, twice] = [false, true].map((second) => {
        const ours = REDIS_ALGORITHMS.map(([id, name]) => ({
          name,
          b: bytesPerKey(run, `sluice-${id}`, second),
        }))
        const rlf = bytesPerKey(run, 'rate-limiter-flexible', second)
        const rlr = bytesPerKey(run, 'rate-limit-redis', second)
        return {
          sluice: ours.map((o) => `${o.name} ${bytes(o.b)}`).join(', '),
          peer: `rate-limiter-flexible ${bytes(rlf)}, rate-limit-redis ${bytes(rlr)}`,
          // Whole bytes per key: the same layout measures a few bytes apart over 10,000 keys.
          met: ours.every((o) => Math.round(o.b) <= Math.round(rlf)),
        }
      })
      return {
        sluice: `${once!.sluice}; ${SECOND} ${twice!.sluice}`,
        peer: `${once!.peer}; ${SECOND} ${twice!.peer}`,
        met: once!.met && twice!.met,
      }
    },
  },
  {
    measure: 'Envoy `ShouldRateLimit` over gRPC (h2load, 4 connections x 16 streams): server CPU per call',
    goal: "at most 1.3x the bare node:http2 handler's, and at least the decisions/s of `POST /v1/check` on the same server",
    fill(run) {
      const cpu = run.get('envoy/sluice-grpc cpu').value
      const calls = run.get('envoy/sluice-grpc rate').value
      const bare = run.get('envoy/bare-http2 cpu').value
      const check = run.get('envoy/sluice-v1-check rate').value
      const bareCalls = run.has('envoy/bare-http2 rate')
        ? `, ${rate(run.get('envoy/bare-http2 rate').value)} calls`
        : ''
      const empty = run.has('envoy/grpc-js-empty cpu')
        ? `an empty grpc-js server: ${us(run.get('envoy/grpc-js-empty cpu').value)}; `
        : ''
      // What the protocol's own work costs without node:http2: how much of the bare handler's is node:http2's.
      const framing = run.has('envoy/h2-framing cpu')
        ? `; HTTP/2 framed by hand over node:net, without node:http2: ${us(run.get('envoy/h2-framing cpu').value)}`
        : ''
      return {
        sluice: `${us(cpu)} (${x(cpu / bare)} the bare handler's), ${rate(calls)} calls (memory store)`,
        // The bare handler's own calls/s: how far any handler on node:http2 gets against /v1/check.
        peer: `${empty}a bare \`node:http2\` handler: ${us(bare)}${bareCalls}${framing}; \`POST /v1/check\`: ${rate(check)} decisions`,
        met: cpu <= 1.3 * bare && calls >= check,
      }
    },
  },
  {
    measure: '`await limiter.consume`, memory store, 10k keys',
    goal: 'at least 0.8x',
    fill(run) {
      const s = run.get('memory/sluice-token-bucket-consume rate').value
      const ratio = run.get('memory/sluice-token-bucket-consume vs-erl')
      const vsErl = ratio.value
      // Pooled over several processes: each one's own median, so the spread the verdict sits in shows.
      const byProcess = ratio.note?.startsWith('by process') === true ? `; ${ratio.note}` : ''
      // express-rate-limit's store in the token bucket's own process (the ratio's yardstick) when the case measured it there.
      const erl = run.get(
        run.has('memory/express-rate-limit-store@token-bucket rate')
          ? 'memory/express-rate-limit-store@token-bucket rate'
          : 'memory/express-rate-limit-store rate',
      ).value
      const cpu = run.has('memory/sluice-token-bucket-consume vs-erl-cpu')
        ? `; per CPU second ${x(run.get('memory/sluice-token-bucket-consume vs-erl-cpu').value)}`
        : ''
      return {
        sluice: `${rate(s)}, token bucket (${x(vsErl)} express-rate-limit's \`MemoryStore.increment\`${cpu}${byProcess})`,
        peer: `express-rate-limit \`MemoryStore.increment\` ${rate(erl)}`,
        met: vsErl >= 0.8,
      }
    },
  },
  {
    measure: 'Express + memory, Express + Redis, Fastify + Redis: server CPU per request',
    goal: 'stay at or below the best peer',
    fill(run) {
      const rows = STAY_AHEAD.map((r) => ({
        label: r.label,
        sluice: http(run, r.sluice),
        peer: bestPeer(run, r.peers),
      }))
      return {
        sluice: rows.map((r) => `${r.label} ${r.sluice.text}`).join('; '),
        peer: rows.map((r) => `${r.label}: ${r.peer.text}`).join('; '),
        met: rows.every((r) => r.sluice.cpu <= r.peer.cpu),
      }
    },
  },
]

class Missing extends Error {}

/** The summary as Markdown lines; a row whose inputs this run did not produce says "not run". */
export function summaryTable(rows: readonly BenchRow[]): string[] {
  const byId = new Map<string, BenchRow>()
  for (const row of rows) if (row.id !== undefined && !Number.isNaN(row.value)) byId.set(row.id, row)
  const run: Run = {
    get(id) {
      const row = byId.get(id)
      if (row === undefined) throw new Missing(id)
      return row
    },
    has: (id) => byId.has(id),
  }
  const lines = ['| measure | Sluice | peer / ceiling | goal | met? |', '| --- | --- | --- | --- | --- |']
  for (const r of SUMMARY) {
    try {
      const cells = r.fill(run)
      lines.push(
        `| ${r.measure} | ${cells.sluice} | ${cells.peer} | ${r.goal} | ${cells.met ? 'met' : 'missed'} |`,
      )
    } catch (error) {
      if (!(error instanceof Missing)) throw error
      lines.push(`| ${r.measure} | not run | not run | ${r.goal} | not run |`)
    }
  }
  return lines
}
