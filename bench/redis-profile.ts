// The Redis case's 64-in-flight loop (bench/cases/redis.ts: token bucket on ioredis over 10,000 keys)
// for a profiler or a before/after: this process's CPU per decision, redis-server's CPU per decision
// (/proc) and decisions/s of each subject, in interleaved rounds on one redis-server, with each
// round's ratios to rate-limiter-flexible. `--in-flight N` keeps N decisions in flight instead of 64.
// `--window D` is the bucket's window (default 1h: every decision starts a new key; 12d: each key
// is read back, as the Redis case's subject with keys kept between hits).
// Builds of Sluice that share a process share the store's code sites, and so V8's feedback there:
// compare two builds in runs of their own.
// Subjects: `sluice` (this tree's dist/), `rate-limiter-flexible`, and `<name>=<dist dir>` for a
// Sluice built elsewhere (another commit's worktree, built).
//   npm run -s build
//   node --import tsx bench/redis-profile.ts --subjects sluice,rate-limiter-flexible,before=<dir> --rounds 5
//   node --cpu-prof --cpu-prof-dir=<dir> --import tsx bench/redis-profile.ts --subjects sluice --ms 5000
//   ... --decisions <n>: a fixed count instead of a time (n per round, after a warm-up of n); with
//   --callgrind, under valgrind, each subject's rounds alone are counted in instructions
//   (callgrind_control turns instrumentation on and off around each and reads the count), a count
//   no other load on the machine changes but for how many decisions share a call, printed beside it
//   (EVALSHA calls from INFO commandstats). Every thread's count and the main thread's: V8's GC and
//   compiler threads swing the first by 2x from round to round. Subjects interleave as above:
//   valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=/tmp/cg.%p node --import tsx \
//     bench/redis-profile.ts --subjects sluice,before=<dir> --decisions 5000 --rounds 3 --callgrind
//   ... --cpu-profile <dir>: each subject's measured rounds under V8's CPU profiler (warm-up and
//   start-up left out), written as <dir>/<subject>-<round>.cpuprofile, and each subject's busy time by
//   owner printed (bench/profile-shares.ts). The profiler's own cost inflates the CPU figures.
//   ... --allocations <file>: an allocation sampling profile of the rounds (every allocation,
//   collected or not) with the count of decisions, as JSON { decisions, profile }.
import { execFile } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { Session } from 'node:inspector/promises'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs, promisify } from 'node:util'
import { Redis } from 'ioredis'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { startRedis } from '../test/helpers/redis-harness.js'
import { median, processCpuMicros } from './load.js'
import { type CpuProfile, profileShares, sharesTable } from './profile-shares.js'
import { throughput } from './throughput.js'

const run = promisify(execFile)
const { values } = parseArgs({
  options: {
    subjects: { type: 'string', default: 'sluice' },
    ms: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '1' },
    allocations: { type: 'string' },
    'cpu-profile': { type: 'string' },
    decisions: { type: 'string' },
    callgrind: { type: 'boolean', default: false },
    'in-flight': { type: 'string', default: '64' },
    window: { type: 'string', default: '1h' },
  },
})
const ms = Number(values.ms)
const rounds = Number(values.rounds)
const inFlight = Number(values['in-flight'])
if (!Number.isSafeInteger(inFlight) || inFlight < 1)
  throw new Error('--in-flight takes a whole number of 1 or more')
const keys = Array.from({ length: 10_000 }, (_, i) => `user-${String(i).padStart(5, '0')}`)

interface Subject {
  name: string
  decide(key: string): Promise<unknown>
  /** Checks each answer, with no promise of its own. */
  check?(answer: unknown): void
}

/** A limiter of the Sluice built in `dist`, as the Redis case configures it. */
async function sluiceFrom(name: string, dist: string, client: Redis): Promise<Subject> {
  const base = pathToFileURL(`${resolve(dist)}/`).href
  const { createLimiter } = await import(new URL('index.js', base).href)
  const { redisStore } = await import(new URL('redis.js', base).href)
  const limiter = createLimiter({
    store: redisStore(client),
    policies: { api: { algorithm: 'token-bucket', limit: 1_000_000, window: values.window } },
    storeTimeout: '60s',
  })
  return {
    name,
    decide: (key) => limiter.consume('api', key),
    check: (answer) => {
      const decision = answer as { allowed: boolean; degraded?: boolean }
      if (!decision.allowed || decision.degraded === true) throw new Error('a decision was not Redis’s allow')
    },
  }
}

/**
 * The instructions callgrind has counted since the last `--zero`, every thread's (GC helpers
 * included): the sum of the `Th <n> <count>` lines of callgrind_control -e.
 */
async function instructionsSoFar(): Promise<{ all: number; main: number }> {
  const { stdout } = await run('callgrind_control', ['-e', String(process.pid)])
  const threads = [...stdout.matchAll(/^\s*Th\s*(\d+)\s+([\d,]+)\s*$/gm)].map((t) => ({
    thread: Number(t[1]),
    count: Number(t[2]!.replaceAll(',', '')),
  }))
  if (threads.length === 0) throw new Error(`callgrind_control -e: no thread totals in ${stdout}`)
  return {
    all: threads.reduce((sum, t) => sum + t.count, 0),
    main: threads.find((t) => t.thread === 1)?.count ?? 0,
  }
}

/** EVALSHA calls counted in an INFO commandstats reply. */
function evalshaCalls(info: string): number {
  return Number(/cmdstat_evalsha:calls=(\d+)/.exec(info)?.[1] ?? 0)
}

const server = await startRedis()
const client = new Redis(server.port, '127.0.0.1')
try {
  const subjects: Subject[] = []
  for (const spec of values.subjects.split(',')) {
    if (spec === 'rate-limiter-flexible') {
      const rlf = new RateLimiterRedis({ storeClient: client, points: 1_000_000, duration: 3600 })
      subjects.push({ name: spec, decide: (key) => rlf.consume(key) })
    } else if (spec === 'sluice') {
      subjects.push(await sluiceFrom(spec, 'packages/sluice/dist', client))
    } else {
      const [name, dist] = spec.split('=')
      subjects.push(await sluiceFrom(name!, dist!, client))
    }
  }
  let decisions = 0
  let subject = subjects[0]!
  const counted = (key: string) => {
    decisions++
    return subject.decide(key)
  }
  const fixed = values.decisions === undefined ? undefined : Number(values.decisions)
  /** `fixed` decisions, `inFlight` at a time; decisions/s. */
  async function count(n: number): Promise<{ rate: number }> {
    let next = 0
    const started = performance.now()
    const lane = async () => {
      while (next < n) subject.check?.(await counted(keys[next++ % keys.length]!))
    }
    await Promise.all(Array.from({ length: inFlight }, lane))
    return { rate: (n / (performance.now() - started)) * 1000 }
  }
  // Warm: every subject's code compiled before the first measured round.
  for (const s of subjects) {
    subject = s
    if (fixed === undefined) await throughput(counted, inFlight, 500, keys)
    else await count(fixed)
  }
  const session = values.allocations === undefined ? undefined : new Session()
  if (session !== undefined) {
    session.connect()
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    })
  }
  const profileDir = values['cpu-profile']
  const profiler = profileDir === undefined ? undefined : new Session()
  const cpuProfiles = new Map<string, CpuProfile[]>(subjects.map((s) => [s.name, []]))
  if (profiler !== undefined) {
    mkdirSync(profileDir!, { recursive: true })
    profiler.connect()
    await profiler.post('Profiler.enable')
  }
  const cpu = new Map<string, number[]>(subjects.map((s) => [s.name, []]))
  const rates = new Map<string, number[]>(subjects.map((s) => [s.name, []]))
  /** redis-server's CPU per decision (µs), where /proc is there; not with --decisions. */
  const serverCpu = new Map<string, number[]>(subjects.map((s) => [s.name, []]))
  const serverPid = Number(/process_id:(\d+)/.exec(await client.info('server'))?.[1])
  let total = 0
  const callgrind = (...args: string[]) => run('callgrind_control', [...args, String(process.pid)])
  /** Each subject's rounds: instructions per decision, and decisions per EVALSHA call. */
  const instructionCounts = new Map<
    string,
    { instructions: { all: number; main: number }; decisions: number; calls: number }[]
  >(subjects.map((s) => [s.name, []]))
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < subjects.length; i++) {
      subject = subjects[(i + round) % subjects.length]!
      decisions = 0
      if (values.callgrind) {
        await client.config('RESETSTAT')
        await callgrind('--zero')
        await callgrind('-i', 'on')
      }
      if (profiler !== undefined) await profiler.post('Profiler.start')
      if (fixed === undefined) {
        // The measured phase alone: throughput's own figures (no warm-up, no latency sort).
        let serverBefore: number | undefined
        let serverAfter: number | undefined
        const r = await throughput(subject.decide, inFlight, ms, keys, {
          ...(subject.check ? { check: subject.check } : {}),
          before: () => {
            serverBefore = processCpuMicros(serverPid)
          },
          after: () => {
            serverAfter = processCpuMicros(serverPid)
          },
        })
        cpu.get(subject.name)!.push(r.cpuUs / r.decisions)
        if (serverBefore !== undefined && serverAfter !== undefined)
          serverCpu.get(subject.name)!.push((serverAfter - serverBefore) / r.decisions)
        rates.get(subject.name)!.push(r.rate)
        total += r.decisions
      } else {
        const before = process.cpuUsage()
        const r = await count(fixed)
        const used = process.cpuUsage(before)
        cpu.get(subject.name)!.push((used.user + used.system) / decisions)
        rates.get(subject.name)!.push(r.rate)
        total += decisions
      }
      if (profiler !== undefined) {
        const { profile } = await profiler.post('Profiler.stop')
        writeFileSync(`${profileDir}/${subject.name}-${round}.cpuprofile`, JSON.stringify(profile))
        cpuProfiles.get(subject.name)!.push(profile as CpuProfile)
      }
      if (values.callgrind) {
        // Read while instrumentation is on (callgrind has nothing to report once it is off).
        const instructions = await instructionsSoFar()
        await callgrind('-i', 'off')
        instructionCounts.get(subject.name)!.push({
          instructions,
          decisions,
          calls: evalshaCalls(await client.info('commandstats')),
        })
      }
      await client.flushall()
    }
  }
  if (values.callgrind) {
    // The medians of each subject's rounds (every subject ran the same load, in rotating order).
    for (const s of subjects) {
      const r = instructionCounts.get(s.name)!
      console.log(
        JSON.stringify({
          subject: s.name,
          instructionsPerDecision: Math.round(median(r.map((x) => x.instructions.all / x.decisions))),
          mainThreadPerDecision: Math.round(median(r.map((x) => x.instructions.main / x.decisions))),
          decisionsPerCall: Number(median(r.map((x) => x.decisions / x.calls)).toFixed(1)),
          rounds: r.map((x) => ({
            instructions: x.instructions.all,
            mainThread: x.instructions.main,
            decisions: x.decisions,
            evalshaCalls: x.calls,
          })),
        }),
      )
    }
  }
  if (session !== undefined) {
    const { profile } = await session.post('HeapProfiler.stopSampling')
    writeFileSync(values.allocations!, JSON.stringify({ decisions: total, profile }))
    session.disconnect()
  }
  if (profiler !== undefined) {
    profiler.disconnect()
    for (const s of subjects) {
      console.log(`\n### ${s.name}: busy time by owner (${profileDir}/${s.name}-*.cpuprofile)\n`)
      for (const line of sharesTable(profileShares(cpuProfiles.get(s.name)!))) console.log(line)
    }
    console.log()
  }
  const peer = 'rate-limiter-flexible'
  const vs = (m: Map<string, number[]>, name: string) =>
    m.has(peer) ? median(m.get(name)!.map((v, i) => v / m.get(peer)![i]!)).toFixed(2) : '-'
  for (const s of subjects) {
    const server = serverCpu.get(s.name)!
    console.log(
      JSON.stringify({
        subject: s.name,
        inFlight,
        cpuPerDecisionUs: Number(median(cpu.get(s.name)!).toFixed(2)),
        cpuVsPeer: vs(cpu, s.name),
        ...(server.length > 0 ? { redisServerCpuPerDecisionUs: Number(median(server).toFixed(2)) } : {}),
        rate: Math.round(median(rates.get(s.name)!)),
        rateVsPeer: vs(rates, s.name),
      }),
    )
  }
} finally {
  client.disconnect()
  await server.stop()
}
