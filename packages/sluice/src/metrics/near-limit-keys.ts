// The keys near their limit, as the dashboard lists them: each decision that crossed its policy's
// nearLimit line (nearLimitCrossed) puts its key first, until the key's window resets. Bounded: the
// oldest crossing goes when a new key would make more than `max`.

/** A key whose decision crossed its policy's nearLimit line, as the dashboard snapshot lists it. */
export interface NearLimitKey {
  /** The policy whose line was crossed. */
  policy: string
  /** The key that crossed it (as decisions name it: `ip:203.0.113.7`, `user:42`, ...). */
  key: string
  /** The policy's capacity. */
  limit: number
  /** Units left after the crossing decision. */
  remaining: number
  /** When it crossed (ms). */
  at: number
  /** When the key is back to full, as that decision said (ms). */
  resetAt: number
}

export class NearLimitKeys {
  /** By policy and key, oldest crossing first (a new crossing of a listed key moves it to the end). */
  readonly #byKey = new Map<string, NearLimitKey>()
  constructor(private readonly max = 20) {}

  crossed(policy: string, key: string, limit: number, remaining: number, at: number, resetMs: number): void {
    const id = `${policy}\u0000${key}`
    this.#byKey.delete(id)
    this.#byKey.set(id, { policy, key, limit, remaining, at, resetAt: at + resetMs })
    if (this.#byKey.size > this.max) this.#byKey.delete(this.#byKey.keys().next().value!)
  }

  /** The keys whose window has not reset by `now`, newest crossing first. */
  list(now: number): NearLimitKey[] {
    const out: NearLimitKey[] = []
    for (const [id, entry] of this.#byKey) {
      if (entry.resetAt <= now) this.#byKey.delete(id)
      else out.push({ ...entry })
    }
    return out.reverse()
  }
}
