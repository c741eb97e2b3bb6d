// The shared load loop of the Redis-backed bench cases: keep N decisions in flight for a while and
// report decisions/s, latency percentiles and this process's CPU per decision.

/** One decision. */
export type Decide = (key: string) => Promise<unknown> | unknown

export interface Throughput {
  rate: number
  p50: number
  p99: number
  /** Decisions answered in the measured phase (the warm-up's are not counted). */
  decisions: number
  /** This process's CPU (user + system, µs) over the measured phase alone: warm-up and the latency sort excluded. */
  cpuUs: number
}

export interface ThroughputHooks {
  /** Called with each answer, synchronously after its `await` (throw to fail the run). */
  check?: (answer: unknown) => void
  /** Called right before the measured phase starts and right after its last answer. */
  before?: () => void
  after?: () => void
}

/**
 * Keep `inFlight` decisions outstanding for `ms` over `keys` keys; decisions/s and latency (ms).
 * The loop's own work is counted in this process's CPU, so it is kept small: the clock is read once
 * per decision for the deadline, and a latency is recorded for one decision in four (two more reads).
 */
export async function throughput(
  decide: Decide,
  inFlight: number,
  ms: number,
  keys: readonly string[],
  hooks: ThroughputHooks = {},
): Promise<Throughput> {
  const check = hooks.check
  let decisions = 0
  const lane = async (until: number, latencies: number[] | undefined) => {
    let i = Math.floor(Math.random() * keys.length)
    let n = 0
    while (performance.now() < until) {
      const timed = latencies !== undefined && (n++ & 3) === 0
      const t = timed ? performance.now() : 0
      const answer = await decide(keys[i++ % keys.length]!)
      if (check !== undefined) check(answer)
      decisions++
      if (timed) latencies.push(performance.now() - t)
    }
  }
  const warm = performance.now() + Math.min(300, ms / 4)
  await Promise.all(Array.from({ length: inFlight }, () => lane(warm, undefined)))
  const latencies: number[] = []
  hooks.before?.()
  decisions = 0
  const cpu = process.cpuUsage()
  const start = performance.now()
  await Promise.all(Array.from({ length: inFlight }, () => lane(start + ms, latencies)))
  const elapsed = performance.now() - start
  const used = process.cpuUsage(cpu)
  hooks.after?.()
  latencies.sort((a, b) => a - b)
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]!
  return {
    rate: (decisions / elapsed) * 1000,
    p50: pct(0.5),
    p99: pct(0.99),
    decisions,
    cpuUs: used.user + used.system,
  }
}
