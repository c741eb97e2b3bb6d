// What a script call costs inside Redis, counted in CPU instructions by valgrind's callgrind: the
// count is the same from run to run whatever else the machine does, unlike the time per call, which
// drifts 2-3x on these shared cores. For each script: redis-server runs under callgrind, SCRIPT LOAD,
// redis-benchmark sends n and then 3n EVALSHA calls (one client, random keys out of 10,000), and
// the difference of the two totals divided by 2n is the cost of one call: server start and shutdown
// cancel out. Per decision = per call / decisions in the call.
// Run: npm run bench:lua [-- --only <substring>]   (about 10 s per script; needs valgrind)
import { execFile, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs, promisify } from 'node:util'
import { Redis } from 'ioredis'
import { luaSources } from '../src/stores/redis/lua.generated.js'
import { freePort, redisServerArgs } from '../test/helpers/redis-harness.js'
import { MINIMAL_TOKEN_BUCKET, RLF_SCRIPT } from './reference-scripts.js'

const run = promisify(execFile)

interface Case {
  name: string
  source: string
  /** EVALSHA arguments after the sha: numkeys, keys, args (`__rand_int__` is a random 0-9999). */
  args: string[]
  decisions: number
}

const LIMIT = ['1000000', '3600000', '1000000']

/**
 * A flat one-<algorithm> call carrying `count` consume decisions on distinct keys, laid out as the
 * store lays them out (scripts/one-prelude.lua): limit, windowMs, capacity (token bucket and GCRA),
 * cost, lease id (concurrency).
 */
function flatCase(algorithm: string, count: number): Case {
  const keys = Array.from({ length: count }, (_, i) => [
    `lc:{${i}:__rand_int__}:${algorithm}`,
    `lc:{${i}:__rand_int__}:${algorithm}:block`,
  ]).flat()
  const capacity = algorithm === 'token-bucket' || algorithm === 'gcra'
  const perDecision = [
    ...(capacity ? LIMIT : LIMIT.slice(0, 2)),
    '1',
    ...(algorithm === 'concurrency' ? ['lease'] : []),
  ]
  return {
    name: `flat one-${algorithm}, ${count} per call`,
    source: luaSources[`one-${algorithm}` as keyof typeof luaSources],
    args: [String(keys.length), ...keys, '', ...Array.from({ length: count }, () => perDecision).flat()],
    decisions: count,
  }
}

function cases(): Case[] {
  const out: Case[] = [
    { name: 'empty script (return 1)', source: 'return 1', args: ['0'], decisions: 1 },
    {
      name: 'rate-limiter-flexible RateLimiterRedis',
      source: RLF_SCRIPT,
      args: ['1', 'lc:rlf:__rand_int__', '1', '3600'],
      decisions: 1,
    },
    {
      name: 'minimal token-bucket script',
      source: MINIMAL_TOKEN_BUCKET,
      args: ['1', 'lc:min:{__rand_int__}', ...LIMIT],
      decisions: 1,
    },
  ]
  for (const name of Object.keys(luaSources)) {
    if (!name.startsWith('one-') || name === 'one-prelude') continue
    const algorithm = name.slice('one-'.length)
    out.push(flatCase(algorithm, 1), flatCase(algorithm, 16))
    // The module path of the same decision: apply/<algorithm>, used for layered decisions.
    out.push({
      name: `module apply/${algorithm}, 1 per call`,
      source: luaSources[`apply/${algorithm}` as keyof typeof luaSources],
      args: [
        '2',
        `lc:{m:__rand_int__}:${algorithm}`,
        `lc:{m:__rand_int__}:${algorithm}:block`,
        'consume',
        '',
        '0',
        algorithm,
        ...LIMIT,
        '1',
        'lease',
      ],
      decisions: 1,
    })
  }
  return out
}

/** Total instructions redis-server executes from start to shutdown, with `calls` EVALSHA of `c`. */
async function totalInstructions(c: Case, calls: number): Promise<number> {
  const port = await freePort()
  const out = join(tmpdir(), `sluice-callgrind.${port}`)
  const dir = mkdtempSync(join(tmpdir(), 'sluice-lua-cost-'))
  const server = spawn(
    'valgrind',
    ['--tool=callgrind', `--callgrind-out-file=${out}`, 'redis-server', ...redisServerArgs(port, dir)],
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
    await client.script('LOAD', c.source)
    const sha = createHash('sha1').update(c.source).digest('hex')
    // One call first (in both runs, so it cancels out): a script that errors on these arguments
    // would otherwise be measured as a cheap call. ioredis rejects on an error reply.
    const [numkeys, ...rest] = c.args.map((a) => a.replaceAll('__rand_int__', 'check'))
    await client.evalsha(sha, numkeys!, ...rest)
    const cmd = ['-h', '127.0.0.1', '-p', String(port), '-c', '1', '-n', String(calls), '-r', '10000', '-q']
    await run('redis-benchmark', [...cmd, 'EVALSHA', sha, ...c.args])
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
export async function instructionsPerCall(c: Case, n = 2000): Promise<number> {
  const calls = Math.max(200, Math.ceil(n / c.decisions))
  const low = await totalInstructions(c, calls)
  const high = await totalInstructions(c, 3 * calls)
  return (high - low) / (2 * calls)
}

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
  const all = cases().filter((c) => values.only === undefined || c.name.includes(values.only))
  let minimal: number | undefined
  console.log('| script | instructions per call | per decision | per decision vs minimal token bucket |')
  console.log('| --- | ---: | ---: | ---: |')
  for (const c of all) {
    const perCall = await instructionsPerCall(c)
    const perDecision = perCall / c.decisions
    if (c.name === 'minimal token-bucket script') minimal = perDecision
    const ratio = minimal === undefined ? '' : `${(perDecision / minimal).toFixed(2)}x`
    const fmt = (n: number) => Math.round(n).toLocaleString('en-US')
    console.log(`| ${c.name} | ${fmt(perCall)} | ${fmt(perDecision)} | ${ratio} |`)
  }
}

await main()
