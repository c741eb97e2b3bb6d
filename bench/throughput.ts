// The shared load loop of the Redis-backed bench cases: keep N decisions in flight for a while and
// report decisions/s and latency percentiles.

/** One decision; its result is ignored. */
export type Decide = (key: string) => Promise<unknown> | unknown

export interface Throughput {
  rate: number
  p50: number
  p99: number
}

/** Keep `inFlight` decisions outstanding for `ms` over `keys` keys; decisions/s and latency (ms). */
export async function throughput(
  decide: Decide,
  inFlight: number,
  ms: number,
  keys: readonly string[],
): Promise<Throughput> {
  const lane = async (until: number, latencies: number[] | undefined) => {
    let i = Math.floor(Math.random() * keys.length)
    while (performance.now() < until) {
      const t = performance.now()
      await decide(keys[i++ % keys.length]!)
      latencies?.push(performance.now() - t)
    }
  }
  const warm = performance.now() + Math.min(300, ms / 4)
  await Promise.all(Array.from({ length: inFlight }, () => lane(warm, undefined)))
  const latencies: number[] = []
  const start = performance.now()
  await Promise.all(Array.from({ length: inFlight }, () => lane(start + ms, latencies)))
  const elapsed = performance.now() - start
  latencies.sort((a, b) => a - b)
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))]!
  return { rate: (latencies.length / elapsed) * 1000, p50: pct(0.5), p99: pct(0.99) }
}
