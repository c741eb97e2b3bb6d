// The budgets of `npm run bench -- --check`: what the code may cost per decision or request on this
// machine (heap bytes, promises, latency under a store failure). `npm test` asserts behaviour only;
// these numbers are measured here (bench/budgets/measure.ts) and judged against their limits. Why
// each number is what it is: docs/benchmark-cases.md, "Budgets".

export interface Budget {
  id: string
  /** What is measured, in words: the table's first column. */
  what: string
  /** The largest measured value that meets the budget. */
  limit: number
  unit: string
}

export interface Judged extends Budget {
  /** Undefined when it was not measured (its measurement failed). */
  measured: number | undefined
  met: boolean
  note?: string
}

const STORE_TIMEOUT = 'storeTimeout 100 ms, 64 in flight'

export const BUDGETS: readonly Budget[] = [
  {
    id: 'start/healthz-seconds',
    what: '`npm start` with no earlier build: the command run to the first /healthz answer',
    limit: 10,
    unit: 's',
  },
  {
    id: 'memory/consumeSync-bytes',
    what: 'memory store, token bucket: heap bytes per consumeSync',
    limit: 300,
    unit: 'B',
  },
  {
    id: 'memory/consume-bytes',
    what: 'memory store, token bucket: heap bytes per await consume',
    limit: 600,
    unit: 'B',
  },
  {
    id: 'memory/swc-consumeSync-bytes',
    what: 'memory store, sliding window counter: heap bytes per consumeSync',
    limit: 260,
    unit: 'B',
  },
  {
    id: 'memory/gcra-consumeSync-bytes',
    what: 'memory store, GCRA: heap bytes per consumeSync',
    limit: 160,
    unit: 'B',
  },
  {
    id: 'memory/bytes-per-key',
    what: 'memory store: heap per key held (1,000,000 keys, maxKeys 100,000)',
    limit: 400,
    unit: 'B',
  },
  {
    id: 'memory/growth-past-maxKeys',
    what: 'memory store: heap growth over the second 500,000 of those keys',
    limit: 2,
    unit: 'MB',
  },
  {
    id: 'http/core-bytes',
    what: 'HTTP core check(), memory store, one ip layer: heap bytes per request',
    limit: 1_000,
    unit: 'B',
  },
  {
    id: 'http/fastify-hook-bytes',
    what: 'Fastify onRequest hook, outside the core: heap bytes per request',
    limit: 500,
    unit: 'B',
  },
  {
    id: 'grpc/open-call-bytes-over-bare',
    what: "gRPC listener: heap bytes held per open ShouldRateLimit call, beyond a bare node:http2 handler's",
    limit: 200,
    unit: 'B',
  },
  {
    id: 'http/fastify-redis-promises',
    what: 'Fastify on Redis: promises the adapter and core add per request',
    limit: 0.5,
    unit: 'promises',
  },
  {
    id: 'http/express-redis-promises',
    what: 'Express on Redis: promises the adapter and core add per request',
    limit: 0.5,
    unit: 'promises',
  },
  {
    id: 'redis/decide-promises',
    what: 'limiter.decide on Redis (ioredis): promises per decision',
    limit: 4.5,
    unit: 'promises',
  },
  {
    id: 'redis/promoted-bytes',
    what: 'bytes V8 promotes to its old generation per decision on Redis, 64 in flight, after a full collection made while decisions were pending',
    limit: 100,
    unit: 'B',
  },
  {
    id: 'redis/sliding-log-cost-1e6-usec',
    what: 'Redis time of a sliding-window-log call of cost 1,000,000 (INFO commandstats)',
    limit: 2_000,
    unit: 'µs',
  },
  ...(['open', 'closed', 'memory'] as const).flatMap((mode) => [
    {
      id: `failover/sigkill-${mode}-p99`,
      what: `Redis killed under load, onStoreError ${mode} (${STORE_TIMEOUT}): p99 decision latency`,
      limit: 110,
      unit: 'ms',
    },
    {
      id: `failover/sigkill-${mode}-recovery`,
      what: `Redis killed, onStoreError ${mode}: restart to the first decision Redis answers`,
      limit: 2_000,
      unit: 'ms',
    },
  ]),
  {
    id: 'failover/sigstop-p99',
    what: `Redis paused (SIGSTOP) 2 s under load (${STORE_TIMEOUT}): p99 decision latency`,
    limit: 110,
    unit: 'ms',
  },
  {
    id: 'failover/sigstop-recovery',
    what: 'Redis paused: SIGCONT to the first decision Redis answers',
    limit: 2_000,
    unit: 'ms',
  },
  {
    id: 'failover/late-past-own-timeout',
    what: 'paused Redis, storeTimeout 150 ms, 3 waves 60 ms apart: latest answer past its own timeout',
    limit: 120,
    unit: 'ms',
  },
]

/** Each budget with its measured value (`measured` by id) and whether it is met. */
export function judge(
  budgets: readonly Budget[],
  measured: ReadonlyMap<string, number>,
  notes: ReadonlyMap<string, string> = new Map(),
): Judged[] {
  return budgets.map((budget) => {
    const value = measured.get(budget.id)
    const met = value !== undefined && !Number.isNaN(value) && value <= budget.limit
    const note = notes.get(budget.id)
    return { ...budget, measured: value, met, ...(note === undefined ? {} : { note }) }
  })
}

/** 1 when any budget is missed (or was not measured), else 0. */
export const exitCodeOf = (judged: readonly Judged[]): number => (judged.every((j) => j.met) ? 0 : 1)

/** Three significant digits, with thousands separators for large numbers. */
function format(n: number): string {
  if (Math.abs(n) >= 1000) return Math.round(n).toLocaleString('en-US')
  return Number(n.toPrecision(3)).toString()
}

/** The verdicts as a Markdown table, one row per budget. */
export function budgetTable(judged: readonly Judged[]): string[] {
  const lines = [
    '| budget | measured | at most | unit | met? | note |',
    '| --- | ---: | ---: | --- | --- | --- |',
  ]
  for (const j of judged) {
    const measured = j.measured === undefined || Number.isNaN(j.measured) ? '-' : format(j.measured)
    lines.push(
      `| ${j.what} | ${measured} | ${format(j.limit)} | ${j.unit} | ${j.met ? 'yes' : '**no**'} | ${j.note ?? ''} |`,
    )
  }
  return lines
}
