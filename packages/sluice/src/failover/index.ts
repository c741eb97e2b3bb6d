// The protection layer for remote stores: timeouts, circuit breaker, in-flight bound, fallbacks.
export type { Admission, Breaker, BreakerOptions, CircuitState } from './breaker.js'
export { createBreaker } from './breaker.js'
export type { FailoverLimiterOptions, FailoverLogger, FailoverSettings, StoreHealthEvent } from './options.js'
export { DEFAULT_FAILOVER, resolveFailover } from './options.js'
export type { FailoverCounts, ProtectedStore, ProtectOptions, StoreHealth } from './protect.js'
export { protectStore } from './protect.js'
