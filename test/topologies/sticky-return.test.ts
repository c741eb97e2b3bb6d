// Sticky routing, the other half of a crash: the killed instance is started again on its
// port (empty memory) and, once the shipped fail_timeout has passed, nginx sends its keys back to it.
// Each move is one more "life" for those keys in docs/topologies.md's bound: up to LIMIT more per
// move in the same window; keys that never moved stay exact throughout.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { StickyRing } from './sticky-ring.js'
import { FAIL_TIMEOUT_MS, LIMIT, startStickyRing } from './sticky-ring.js'

const KEYS = Array.from({ length: 30 }, (_, i) => `sk_back_${String(i).padStart(3, '0')}`)

describe('sticky routing: a killed instance that comes back takes its keys back, with empty counters', () => {
  let ring: StickyRing

  beforeAll(async () => {
    ring = await startStickyRing()
  })
  afterAll(async () => {
    await ring?.stop()
  })

  /** The one instance that has counted each key (exactly one must have). */
  async function homes(): Promise<Map<string, number>> {
    const out = new Map<string, number>()
    for (const [key, used] of await ring.usedByKey(KEYS)) {
      const counted = used.flatMap((u, i) => (u !== undefined && u > 0 ? [i] : []))
      expect(counted, key).toHaveLength(1)
      out.set(key, counted[0]!)
    }
    return out
  }

  it('kill, restart, fail_timeout: moved keys get LIMIT more per move, the others none', async () => {
    const first = await ring.drain(KEYS, LIMIT + 1)
    for (const key of KEYS) expect(first.admitted.get(key), key).toBe(LIMIT)
    const home = await homes()
    const perInstance = [0, 1, 2].map((i) => [...home.values()].filter((h) => h === i).length)
    const victim = perInstance.indexOf(Math.max(...perInstance))
    const moved = KEYS.filter((key) => home.get(key) === victim)
    const stayed = KEYS.filter((key) => home.get(key) !== victim)

    await ring.kill(victim)
    const killedAt = Date.now()
    const second = await ring.drain(KEYS, LIMIT + 1)
    expect(second.statuses).toEqual([200, 429])
    for (const key of moved) expect(second.admitted.get(key), key).toBe(LIMIT)
    for (const key of stayed) expect(second.admitted.get(key), key).toBe(0)

    // Back on its port with an empty store. nginx keeps it out for fail_timeout after the failure it
    // saw (the first request after the kill), on a clock of whole seconds, so 10-12 s. A moved key
    // (the probe) asks once every 200 ms: its first 200 is the restarted instance answering.
    await ring.restart(victim)
    const probe = moved[0]!
    let backAfterMs = -1
    while (Date.now() - killedAt < FAIL_TIMEOUT_MS + 5_000) {
      const { admitted } = await ring.drain([probe], 1)
      if (admitted.get(probe) === 1) {
        backAfterMs = Date.now() - killedAt
        break
      }
      await new Promise((r) => setTimeout(r, 200))
    }
    expect(backAfterMs).toBeGreaterThanOrEqual(FAIL_TIMEOUT_MS)
    const third = await ring.drain(KEYS, LIMIT + 1)
    expect(third.statuses).toEqual([200, 429])
    // The probe's first admit of this third life came from the polling above.
    expect(third.admitted.get(probe)).toBe(LIMIT - 1)
    for (const key of moved.slice(1)) expect(third.admitted.get(key), key).toBe(LIMIT)
    for (const key of stayed) expect(third.admitted.get(key), key).toBe(0)
    // They are home again: the restarted instance has each moved key's whole count, and the survivor
    // that stood in still holds its own (spent) count until the window ends. Keys that never moved
    // are still on their one instance.
    for (const [key, used] of await ring.usedByKey(KEYS)) {
      const counted = used.flatMap((u, i) => (u !== undefined && u > 0 ? [i] : []))
      expect(used[home.get(key)!], key).toBe(LIMIT)
      if (home.get(key) === victim) {
        expect(counted, key).toHaveLength(2)
        for (const i of counted) expect(used[i], key).toBe(LIMIT)
      } else expect(counted, key).toEqual([home.get(key)])
    }

    console.log(
      `sticky return: killed and restarted instance ${victim}; ${moved.length} of ${KEYS.length} keys ` +
        `moved away and back; admitted per moved key in one window: ${LIMIT} + ${LIMIT} + ${LIMIT} ` +
        `(3 lives, bound ${3 * LIMIT}); per key that stayed: ${LIMIT} (exact); ` +
        `keys back home ${backAfterMs} ms after the kill (fail_timeout ${FAIL_TIMEOUT_MS} ms)`,
    )
  })
})
