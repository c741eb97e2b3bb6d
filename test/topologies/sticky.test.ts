// Sticky routing without a shared store: a real nginx runs the SHIPPED
// examples/nginx/sticky.conf (only its ports replaced) in front of three real `sluice serve`
// processes, each on its own memory store with the SHIPPED examples/nginx/sticky.yaml
// (sticky-ring.ts). Per-key limits are exact through nginx; then one instance is SIGKILLed and what
// its keys lose is measured (the figures go to docs/topologies.md).
import { spawnSync } from 'node:child_process'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { StickyRing } from './sticky-ring.js'
import { LIMIT, startStickyRing } from './sticky-ring.js'

const KEYS = Array.from({ length: 60 }, (_, i) => `sk_test_${String(i).padStart(3, '0')}`)

/** nginx 1.23 and later join repeated headers in $http_*; 1.22 (Debian 12) reads the first line. */
function nginxJoinsRepeatedHeaders(): boolean {
  // The binary the harness runs: /usr/sbin/nginx, else nginx on PATH. `nginx -v` prints to stderr.
  const out = ['/usr/sbin/nginx', 'nginx']
    .map((bin) => spawnSync(bin, ['-v'], { encoding: 'utf8' }))
    .find((run) => run.status === 0)
  const version = /nginx\/(\d+)\.(\d+)/.exec(out?.stderr ?? '')
  if (version === null) throw new Error(`cannot read the nginx version: ${out?.stderr}`)
  const [major, minor] = [Number(version[1]), Number(version[2])]
  return major > 1 || minor >= 23
}

describe('sticky routing: nginx consistent hash over three sluice serve instances, memory stores', () => {
  let ring: StickyRing
  /** Which instance (index) counted each key before the kill. */
  const homeBefore = new Map<string, number>()
  let victim = -1

  beforeAll(async () => {
    ring = await startStickyRing()
  })
  afterAll(async () => {
    await ring?.stop()
  })

  /** `perKey` requests for every key through nginx: admits per key; only 200 and 429 ever. */
  async function drain(keys: readonly string[], perKey: number): Promise<Map<string, number>> {
    const { admitted, statuses } = await ring.drain(keys, perKey)
    // Only allow and deny: a dead instance never surfaces as an error to the client.
    expect(statuses).toEqual([200, 429])
    return admitted
  }
  const usedByKey = () => ring.usedByKey(KEYS)
  const usedOn = async (key: string) => (await ring.usedByKey([key])).get(key)!

  it(`admits exactly ${LIMIT} per key through nginx, each key counted on exactly one instance`, async () => {
    const admitted = await drain(KEYS, LIMIT + 1)
    for (const key of KEYS) expect(admitted.get(key), key).toBe(LIMIT)
    expect(ring.appHits()).toBe(KEYS.length * LIMIT)
    const perInstance = [0, 0, 0]
    const usage = await usedByKey()
    for (const key of KEYS) {
      const used = usage.get(key)!
      // One instance has the whole count; the other two never saw the key.
      expect(used.filter((u) => u === LIMIT).length, key).toBe(1)
      expect(used.filter((u) => u === 0).length, key).toBe(2)
      const home = used.indexOf(LIMIT)
      homeBefore.set(key, home)
      perInstance[home]!++
    }
    // The hash spreads the keys: every instance counts some.
    for (const n of perInstance) expect(n).toBeGreaterThan(0)
    console.log(`sticky: keys per instance before the kill: ${perInstance.join(' / ')} of ${KEYS.length}`)
  })

  it('SIGKILL of one instance: only its keys move, each gets at most LIMIT more; the rest stay exact', async () => {
    expect(homeBefore.size).toBe(KEYS.length)
    // The instance with the most keys, so the measured share is the worst of the three.
    const counts = [0, 1, 2].map((i) => [...homeBefore.values()].filter((h) => h === i).length)
    victim = counts.indexOf(Math.max(...counts))
    await ring.kill(victim)

    // The same window (1 minute from each key's first request): every key asks again.
    const started = Date.now()
    const admitted = await drain(KEYS, LIMIT + 1)
    const elapsedMs = Date.now() - started
    const moved = KEYS.filter((key) => homeBefore.get(key) === victim)
    const stayed = KEYS.filter((key) => homeBefore.get(key) !== victim)
    expect(moved.length).toBeGreaterThan(0)
    expect(stayed.length).toBeGreaterThan(0)

    // Keys whose instance lives: exact over the whole window (nothing more after their LIMIT).
    for (const key of stayed) expect(admitted.get(key), key).toBe(0)
    // Keys of the dead instance: their counters restart on the next instance of the ring, so each
    // gets LIMIT more in its window; never more than that (the bound).
    for (const key of moved) expect(admitted.get(key), key).toBe(LIMIT)

    const newHomes = [0, 0, 0]
    const usage = await usedByKey()
    for (const key of KEYS) {
      const used = usage.get(key)!
      expect(used[victim]).toBeUndefined()
      const live = used.filter((u) => u !== undefined)
      // Still on exactly one instance: a moved key on one survivor, never split over both.
      expect(live.filter((u) => u === LIMIT).length, key).toBe(1)
      expect(live.filter((u) => u === 0).length, key).toBe(1)
      const home = used.indexOf(LIMIT)
      // Consistent hashing: a key whose instance is alive did not move.
      if (homeBefore.get(key) !== victim) expect(home, key).toBe(homeBefore.get(key))
      else newHomes[home]!++
    }
    const extra = moved.reduce((sum, key) => sum + admitted.get(key)!, 0)
    console.log(
      `sticky: killed instance ${victim}; keys moved: ${moved.length} of ${KEYS.length} ` +
        `(${((100 * moved.length) / KEYS.length).toFixed(1)}%), to the survivors: ${newHomes
          .filter((_, i) => i !== victim)
          .join(' / ')}; extra admits per moved key: ${extra / moved.length} (limit ${LIMIT}); ` +
        `extra admits per stayed key: 0; total admitted ${KEYS.length * LIMIT + extra} for a budget of ` +
        `${KEYS.length * LIMIT} (+${((100 * extra) / (KEYS.length * LIMIT)).toFixed(1)}%); ` +
        `second pass ${KEYS.length * (LIMIT + 1)} requests in ${elapsedMs} ms`,
    )
  })

  it('a request without an API key is a 401 from nginx: no instance is asked, the app is not reached', async () => {
    const hitsBefore = ring.appHits()
    const res = await fetch(`http://127.0.0.1:${ring.nginxPort}/orders`)
    await res.arrayBuffer()
    // Without the guard, Sluice's 400 missing_key would reach the client as a 500.
    expect(res.status).toBe(401)
    expect(ring.appHits()).toBe(hitsBefore)
  })

  it('a second X-Api-Key line from the client reaches Sluice as nothing: it counts what nginx hashed', async () => {
    // A stayed key, exhausted above; raw requests carry the key twice, the second varying each time.
    const key = KEYS.find((k) => homeBefore.get(k) !== victim)!
    const raw = (second: string) =>
      new Promise<number>((resolve, reject) => {
        const socket = connect(ring.nginxPort, '127.0.0.1')
        let reply = ''
        socket.on('data', (chunk) => {
          reply += chunk.toString()
        })
        socket.on('end', () => resolve(Number(reply.split(' ')[1])))
        socket.on('error', reject)
        socket.write(
          `GET /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: ${key}\r\nX-Api-Key: ${second}\r\n` +
            `X-Forwarded-For: 198.51.100.${second.length}\r\nConnection: close\r\n\r\n`,
        )
      })
    const statuses: number[] = []
    for (let i = 0; i < 5; i++) statuses.push(await raw(`other-${i}`))
    if (nginxJoinsRepeatedHeaders()) {
      // nginx 1.23+: hashed and sent as "key, other-i", a new key of its own on one instance.
      expect(statuses).toEqual([200, 200, 200, 200, 200])
    } else {
      // nginx 1.22: both the hash and the header are the first line, the exhausted key.
      expect(statuses).toEqual([429, 429, 429, 429, 429])
      for (let i = 0; i < 5; i++) {
        const used = await usedOn(`${key}, other-${i}`)
        expect(used.filter((u) => u !== undefined && u > 0)).toEqual([])
      }
    }
    const used = await usedOn(key)
    expect(used.filter((u) => u === LIMIT).length).toBe(1)
  })
})
