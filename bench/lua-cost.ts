// What a script call costs inside Redis, counted in CPU instructions by valgrind's callgrind: the
// count is the same from run to run whatever else the machine does, unlike the time per call, which
// drifts 2-3x on these shared cores. For each script: redis-server runs under callgrind, SCRIPT LOAD,
// (refund and block: 1,000 keys given state first), redis-benchmark sends n and then 3n EVALSHA
// calls (one client, random keys out of 1,000), and the difference of the two totals divided by 2n
// is the cost of one call: server start, setup and shutdown cancel out (`--hz 1`: the server's
// timer work grows with wall time, which valgrind stretches and a loaded machine stretches more). Per decision = per call /
// decisions in the call. Every variant of today's scripts (lua.generated.ts) is measured next to
// the same call of the scripts of main 0a55701 (bench/data/lua-0a55701.ts: module and flat scripts).
// Run: npm run bench:lua [-- --only <substring>]   (about 10 s per script; needs valgrind)
import { execFile, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs, promisify } from 'node:util'
import { Redis } from 'ioredis'
import { ALGORITHMS, type AlgorithmName } from '../packages/sluice/src/policy.js'
import { luaAlgorithms, luaSources } from '../packages/sluice/src/stores/redis/lua.generated.js'
import { freePort, redisServerArgs } from '../test/helpers/redis-harness.js'
import { luaSources0a55701 as before } from './data/lua-0a55701.js'
import { MINIMAL_TOKEN_BUCKET, RLF_SCRIPT } from './reference-scripts.js'

const run = promisify(execFile)

interface Case {
  source: string
  /** EVALSHA arguments after the sha: numkeys, keys, args (`__rand_int__` is a random 0-999). */
  args: string[]
  decisions: number
  /** Calls made before counting, in both runs (so they cancel out): state for refund and block. */
  setup?: { source: string; args: (subject: string) => string[] }
}

/** Subjects redis-benchmark draws with `-r KEYS`: `__rand_int__` becomes the number in 12 digits. */
const KEYS = 1000
const subject = (i: number) => String(i).padStart(12, '0')

const LIMIT = '1000000'
const WINDOW = '3600000'
/**
 * A window in which a token bucket's or GCRA's key outlives the run: 1,000 units of 1,000,000 per
 * 1,000,000 s (about 11.6 days) take about 17 min to come back. Per hour, the one unit a row spends
 * comes back in 3.6 ms, before the key's next call (one in 1,000, each slowed by callgrind), so
 * those rows measure a fresh key. A unit every whole second keeps GCRA's TAT in whole ms, so its
 * keys hold the compact layout, as they do per hour.
 */
const KEPT_WINDOW = '1000000000'
/**
 * One step's arguments today (scripts/variants/apply.lua), in the order the generated module lists
 * them: limit, window, period? (-1: no calendar), following? (the window), capacity?, cost, lease?
 */
const stepArgs = (algorithm: AlgorithmName, cost: string, window = WINDOW): string[] => {
  const layout: readonly string[] = luaAlgorithms[algorithm]
  const value = {
    limit: LIMIT,
    window,
    period: '-1',
    following: window,
    capacity: LIMIT,
    cost,
    lease: '',
  }
  return layout.map((a) => value[a as keyof typeof value])
}
/** One step's arguments of the flat scripts of 0a55701, which took no calendar arguments. */
const beforeStepArgs = (algorithm: AlgorithmName, cost: string, window = WINDOW): string[] => {
  const layout: readonly string[] = {
    concurrency: ['limit', 'window', 'cost', 'lease'],
    'fixed-window': ['limit', 'window', 'cost'],
    gcra: ['limit', 'window', 'capacity', 'cost'],
    'sliding-window-counter': ['limit', 'window', 'cost'],
    'sliding-window-log': ['limit', 'window', 'cost'],
    'token-bucket': ['limit', 'window', 'capacity', 'cost'],
  }[algorithm]
  const value = { limit: LIMIT, window, capacity: LIMIT, cost, lease: '' }
  return layout.map((a) => value[a as keyof typeof value])
}
/** One step's arguments of the module scripts of 0a55701: algorithm, limit, window, capacity, cost, lease. */
const moduleStep = (algorithm: AlgorithmName, cost: string, window = WINDOW) => [
  algorithm,
  LIMIT,
  window,
  LIMIT,
  cost,
  '',
]
const keysOf = (tag: string, policies: string[]) =>
  policies.flatMap((p) => [`lc:{${tag}}:${p}`, `lc:{${tag}}:${p}:block`])
/** The keys of `n` decisions of one policy in one call: one subject, or `n` subjects tagged 0 to n - 1. */
const keysFor = (n: number, tag: string, policy: string) =>
  n === 1
    ? keysOf(tag, [policy])
    : Array.from({ length: n }, (_, i) => keysOf(`${i}:${tag}`, [policy])).flat()

/** Today's call and 0a55701's call of the same work, for one algorithm. */
function variants(algorithm: AlgorithmName): [string, Case, Case][] {
  const one = keysFor(1, '__rand_int__', algorithm)
  const sixteen = keysFor(16, '__rand_int__', algorithm)
  const two = keysOf('__rand_int__', [`${algorithm}-a`, `${algorithm}-b`])
  // Refund and block find state: every key got a consume of 1,000 units first (refunds take 1). Per
  // hour a token bucket or GCRA gets those back in 3.6 s, which a run under callgrind can outlast.
  const window = algorithm === 'token-bucket' || algorithm === 'gcra' ? KEPT_WINDOW : WINDOW
  const setup = {
    source: luaSources[`apply/${algorithm}`],
    args: (s: string) => ['2', ...keysOf(s, [algorithm]), '', '1', ...stepArgs(algorithm, '1000', window)],
  }
  // The 0a55701 scripts find state written by their own apply: a layout of today's (a sliding log's
  // entries) can be one they never wrote, and a refund of it fails on the first call.
  const beforeSetup = {
    source: before[`one-${algorithm}`],
    args: (s: string) => ['2', ...keysOf(s, [algorithm]), '', ...beforeStepArgs(algorithm, '1000', window)],
  }
  return [
    [
      'apply, 1 decision per call',
      {
        source: luaSources[`apply/${algorithm}`],
        args: ['2', ...one, '', '1', ...stepArgs(algorithm, '1')],
        decisions: 1,
      },
      {
        source: before[`one-${algorithm}`],
        args: ['2', ...one, '', ...beforeStepArgs(algorithm, '1')],
        decisions: 1,
      },
    ],
    [
      'apply, 16 decisions per call (coalesced)',
      {
        source: luaSources[`apply/${algorithm}`],
        // One run of 16: the coalesced decisions of one policy share their arguments.
        args: ['32', ...sixteen, '', '16', ...stepArgs(algorithm, '1')],
        decisions: 16,
      },
      {
        source: before[`one-${algorithm}`],
        args: [
          '32',
          ...sixteen,
          '',
          ...Array.from({ length: 16 }, () => beforeStepArgs(algorithm, '1')).flat(),
        ],
        decisions: 16,
      },
    ],
    [
      'layered, 2 steps (per step)',
      {
        source: luaSources.layered,
        args: ['4', ...two, '', '2', ...[0, 1].flatMap(() => [algorithm, ...stepArgs(algorithm, '1')])],
        decisions: 2,
      },
      {
        source: before[`apply/${algorithm}`],
        args: ['4', ...two, 'consume', '', '0', ...moduleStep(algorithm, '1'), ...moduleStep(algorithm, '1')],
        decisions: 2,
      },
    ],
    [
      'refund, 1 step with state',
      {
        source: luaSources.refund,
        args: ['2', ...one, '', algorithm, ...stepArgs(algorithm, '1', window)],
        decisions: 1,
        setup,
      },
      {
        source: before[`refund/${algorithm}`],
        args: ['2', ...one, '', '0', ...moduleStep(algorithm, '1', window)],
        decisions: 1,
        setup: beforeSetup,
      },
    ],
    [
      'block, 1 step with state',
      {
        source: luaSources.block,
        args: ['2', ...one, '', '60000', algorithm, ...stepArgs(algorithm, '1', window)],
        decisions: 1,
        setup,
      },
      {
        source: before.block,
        args: ['2', ...one, '', '0', '60000', ...moduleStep(algorithm, '1', window)],
        decisions: 1,
        setup: beforeSetup,
      },
    ],
  ]
}

/**
 * Today's and 0a55701's decisions on keys written before, in KEPT_WINDOW, one and 16 to a call as
 * in `variants`: every key spends 1,000 units first, so each counted decision reads a stored value
 * back: a compact value, whose time Redis is asked for as the key's expiry.
 */
function kept(algorithm: 'token-bucket' | 'gcra'): [string, Case, Case][] {
  const rows: [string, Case, Case][] = []
  for (const n of [1, 16]) {
    const today = (s: string, cost: string) => [
      String(2 * n),
      ...keysFor(n, s, algorithm),
      '',
      String(n),
      ...stepArgs(algorithm, cost, KEPT_WINDOW),
    ]
    const earlier = (s: string, cost: string) => [
      String(2 * n),
      ...keysFor(n, s, algorithm),
      '',
      ...Array.from({ length: n }, () => beforeStepArgs(algorithm, cost, KEPT_WINDOW)).flat(),
    ]
    const calls = n === 1 ? '1 decision per call' : '16 decisions per call (coalesced)'
    rows.push([
      `${algorithm}: apply, ${calls}, keys read back (1,000,000 per 1,000,000 s)`,
      {
        source: luaSources[`apply/${algorithm}`],
        args: today('__rand_int__', '1'),
        decisions: n,
        setup: { source: luaSources[`apply/${algorithm}`], args: (s) => today(s, '1000') },
      },
      {
        source: before[`one-${algorithm}`],
        args: earlier('__rand_int__', '1'),
        decisions: n,
        setup: { source: before[`one-${algorithm}`], args: (s) => earlier(s, '1000') },
      },
    ])
  }
  return rows
}

/** A layered decision of two algorithms (fixed window + token bucket): today's layered vs 0a55701's full apply. */
function mixed(): [string, Case, Case] {
  const keys = keysOf('__rand_int__', ['fw', 'tb'])
  return [
    'layered, fixed-window + token-bucket (per step)',
    {
      source: luaSources.layered,
      args: [
        '4',
        ...keys,
        '',
        '2',
        'fixed-window',
        ...stepArgs('fixed-window', '1'),
        'token-bucket',
        ...stepArgs('token-bucket', '1'),
      ],
      decisions: 2,
    },
    {
      source: before.apply,
      args: [
        '4',
        ...keys,
        'consume',
        '',
        '0',
        ...moduleStep('fixed-window', '1'),
        ...moduleStep('token-bucket', '1'),
      ],
      decisions: 2,
    },
  ]
}

/** Total instructions redis-server executes from start to shutdown, with `calls` EVALSHA of `c`. */
async function totalInstructions(c: Case, calls: number): Promise<number> {
  const port = await freePort()
  const out = join(tmpdir(), `sluice-callgrind.${port}`)
  const dir = mkdtempSync(join(tmpdir(), 'sluice-lua-cost-'))
  const server = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      `--callgrind-out-file=${out}`,
      'redis-server',
      ...redisServerArgs(port, dir),
      '--hz',
      '1',
    ],
    { stdio: 'ignore' },
  )
  const exited = new Promise((resolve) => server.on('exit', resolve))
  let client: Redis | undefined
  try {
    const deadline = Date.now() + 60_000
    while (client === undefined) {
      const attempt = new Redis(port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => null })
      attempt.on('error', () => {})
      try {
        await attempt.connect()
        client = attempt
      } catch (error) {
        attempt.disconnect()
        if (Date.now() > deadline) throw error
        await new Promise((r) => setTimeout(r, 200))
      }
    }
    if (c.setup !== undefined) {
      const { source, args } = c.setup
      await client.script('LOAD', source)
      const sha = createHash('sha1').update(source).digest('hex')
      const pipeline = client.pipeline()
      for (let i = 0; i < KEYS; i++) {
        const [numkeys, ...rest] = args(subject(i))
        pipeline.evalsha(sha, numkeys!, ...rest)
      }
      // A setup call that errors leaves its key without state: the row would then measure a new key.
      const failed = (await pipeline.exec())?.find(([error]) => error !== null)
      if (failed !== undefined) throw failed[0]
    }
    await client.script('LOAD', c.source)
    const sha = createHash('sha1').update(c.source).digest('hex')
    // One call first (in both runs, so it cancels out): a script that errors on these arguments
    // would otherwise be measured as a cheap call. ioredis rejects on an error reply.
    const [numkeys, ...rest] = c.args.map((a) => a.replaceAll('__rand_int__', 'check'))
    await client.evalsha(sha, numkeys!, ...rest)
    const cmd = [
      '-h',
      '127.0.0.1',
      '-p',
      String(port),
      '-c',
      '1',
      '-n',
      String(calls),
      '-r',
      String(KEYS),
      '-q',
    ]
    // Its progress lines echo the whole command: a slow run prints megabytes.
    await run('redis-benchmark', [...cmd, 'EVALSHA', sha, ...c.args], { maxBuffer: 1 << 30 })
    await client.shutdown('NOSAVE').catch(() => {})
  } finally {
    client?.disconnect()
    server.kill('SIGTERM')
    await exited
  }
  const text = readFileSync(out, 'utf8')
  rmSync(out, { force: true })
  rmSync(dir, { recursive: true, force: true })
  return Number(/^(?:summary|totals): (\d+)/m.exec(text)![1])
}

/** Instructions per call of `c`. */
export async function instructionsPerCall(c: Case, n = 600): Promise<number> {
  const calls = Math.max(200, Math.ceil(n / c.decisions))
  const low = await totalInstructions(c, calls)
  const high = await totalInstructions(c, 3 * calls)
  return (high - low) / (2 * calls)
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US')

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { only: { type: 'string' } } })
  try {
    await run('valgrind', ['--version'])
  } catch {
    console.log(
      'bench/lua-cost.ts: valgrind is not installed (apt-get install -y valgrind); nothing measured',
    )
    return
  }
  const rows: [string, Case, Case | undefined][] = [
    ['empty script (return 1)', { source: 'return 1', args: ['0'], decisions: 1 }, undefined],
    [
      'rate-limiter-flexible RateLimiterRedis',
      { source: RLF_SCRIPT, args: ['1', 'lc:rlf:__rand_int__', '1', '3600'], decisions: 1 },
      undefined,
    ],
    [
      'minimal token-bucket script',
      {
        source: MINIMAL_TOKEN_BUCKET,
        args: ['1', 'lc:min:{__rand_int__}', LIMIT, WINDOW, LIMIT],
        decisions: 1,
      },
      undefined,
    ],
  ]
  for (const algorithm of ALGORITHMS) {
    for (const [what, now, then] of variants(algorithm)) rows.push([`${algorithm}: ${what}`, now, then])
  }
  for (const algorithm of ['token-bucket', 'gcra'] as const) rows.push(...kept(algorithm))
  rows.push(mixed())
  console.log('| call | 0a55701: instructions per decision | today | today / 0a55701 |')
  console.log('| --- | ---: | ---: | ---: |')
  for (const [name, now, then] of rows) {
    if (values.only !== undefined && !name.includes(values.only)) continue
    const today = (await instructionsPerCall(now)) / now.decisions
    const earlier = then === undefined ? undefined : (await instructionsPerCall(then)) / then.decisions
    const ratio = earlier === undefined ? '' : `${(today / earlier).toFixed(2)}x`
    console.log(`| ${name} | ${earlier === undefined ? '' : fmt(earlier)} | ${fmt(today)} | ${ratio} |`)
  }
}

// Run as a script (npm run bench:lua); imported, it only lends instructionsPerCall.
if (process.argv[1]?.endsWith('lua-cost.ts')) await main()
