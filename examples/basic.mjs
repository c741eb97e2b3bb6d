// The README's library example, runnable: `npm run build && node examples/basic.mjs`.
// It imports the package by its name, as an application would ('sluice' resolves to
// packages/sluice/dist/ through the workspace link).
import { createLimiter, memoryStore, SluiceError } from 'sluice'

const limiter = createLimiter({
  store: memoryStore({ now: () => Date.now(), maxKeys: 1_000_000 }), // memory is the default store
  policies: {
    api: { algorithm: 'token-bucket', limit: 10, window: '1s', burst: 20 },
    perIp: { algorithm: 'sliding-window-counter', limit: 1000, window: '1h' },
    perUser: { algorithm: 'sliding-window-log', limit: 100, window: '1m' },
  },
})

const d = await limiter.consume('api', 'user-42') // cost 1
console.log(`api user-42: allowed=${d.allowed} remaining=${d.remaining}/${d.limit}`)

const weighted = await limiter.consume('api', 'user-42', { cost: 5 }) // weighted
console.log(`after cost 5: remaining=${weighted.remaining}`)

// Layered: both layers admit or neither is charged.
const layered = await limiter.consume([
  { policy: 'perIp', key: '203.0.113.7' },
  { policy: 'perUser', key: 'user-42' },
])
console.log(`layered: allowed=${layered.allowed} tightest=${layered.policy} remaining=${layered.remaining}`)

// Spend the rest of the burst, then see the exact wait.
await limiter.consume('api', 'user-42', { cost: 14 })
const denied = await limiter.consume('api', 'user-42')
console.log(`denied: allowed=${denied.allowed} reason=${denied.reason} retryAfterMs=${denied.retryAfterMs}`)

const peeked = await limiter.peek('api', 'user-42')
await limiter.refund('api', 'user-42', 1)
const refunded = await limiter.peek('api', 'user-42')
console.log(`refund: remaining ${peeked.remaining} -> ${refunded.remaining}`)
await limiter.reset('api', 'user-42')
console.log(`reset: remaining=${(await limiter.peek('api', 'user-42')).remaining}`)

// Bad input is a typed error with a stable code, and changes nothing stored.
try {
  await limiter.consume('api', 'user-42', { cost: 1.5 })
} catch (error) {
  if (error instanceof SluiceError) console.log(`error: ${error.code}`)
}
await limiter.close()
