// The memory store under attack: 2,000,000 distinct keys as fast as one core can send them. The
// store must hold at most maxKeys at every moment and the heap must stay flat once it is full.
import v8 from 'node:v8'
import vm from 'node:vm'
import { expect, it } from 'vitest'
import { createLimiter } from '../../packages/sluice/src/limiter.js'
import { memoryStore } from '../../packages/sluice/src/stores/memory.js'
import { percentile, record, round } from './results.js'

v8.setFlagsFromString('--expose-gc')
const gc = vm.runInNewContext('gc') as () => void

const TOTAL = 2_000_000
const MAX_KEYS = 100_000

it('2,000,000 distinct keys stay within maxKeys and flat memory', () => {
  const store = memoryStore({ maxKeys: MAX_KEYS })
  const limiter = createLimiter({
    store,
    policies: { perIp: { algorithm: 'sliding-window-counter', limit: 100, window: '1h' } },
  })
  const heapMb: number[] = []
  let largest = 0
  let denied = 0
  const started = performance.now()
  for (let i = 0; i < TOTAL; i++) {
    if (!limiter.consumeSync('perIp', `attacker-${i}`).allowed) denied++
    if (i % 1000 === 999) largest = Math.max(largest, store.size)
    if (i % 250_000 === 249_999) {
      gc()
      heapMb.push(process.memoryUsage().heapUsed / 2 ** 20)
    }
  }
  const seconds = (performance.now() - started) / 1000
  largest = Math.max(largest, store.size)
  // Memory is flat once the store has filled: the first sample is taken after 250,000 keys
  // (2.5 x maxKeys), so every later sample must be close to it.
  const growth = Math.max(...heapMb) - heapMb[0]!
  record('memory-attack', {
    fault: `memory store: ${TOTAL.toLocaleString('en')} distinct keys, maxKeys ${MAX_KEYS.toLocaleString('en')}`,
    mode: 'memory store',
    clientsSaw: `every key admitted (fresh key each time), ${Math.round(TOTAL / seconds).toLocaleString('en')} decisions/s; at most ${largest.toLocaleString('en')} keys held; heap ${heapMb.map((m) => round(m, 0)).join(' / ')} MB every 250k keys (growth ${round(growth)} MB)`,
    decisions: TOTAL,
    degraded: 0,
    unavailable: 0,
    failed: denied,
    p99Ms: 0,
    maxMs: 0,
    recoveryMs: null,
    notes: `median heap ${round(percentile(heapMb, 50))} MB`,
  })
  expect(denied).toBe(0)
  expect(largest).toBeLessThanOrEqual(MAX_KEYS)
  expect(growth).toBeLessThan(16)
}, 120_000)
