// Sluice: rate limiting for Node.js. The public entry point.

export type { Algorithm, Outcome } from './algorithms/index.js'
export { algorithms } from './algorithms/index.js'
export type { Duration } from './duration.js'
export { parseDuration } from './duration.js'
export type { SluiceErrorCode } from './errors.js'
export {
  InvalidConfigError,
  InvalidCostError,
  InvalidDurationError,
  InvalidKeyError,
  InvalidOptionsError,
  InvalidPolicyError,
  RateLimitedError,
  ReservationExpiredError,
  ReservationSettledError,
  SluiceError,
  StoreClosedError,
  StoreError,
  StoreTimeoutError,
  StoreUnavailableError,
  ThrottleStoppedError,
  TooManyWaitersError,
  UnknownPolicyError,
  UnsupportedError,
  WaitAbortedError,
  WrongAdapterError,
} from './errors.js'
export type {
  CircuitState,
  FailoverCounts,
  FailoverLimiterOptions,
  FailoverLogger,
  ProtectedStore,
  ProtectOptions,
  StoreHealth,
  StoreHealthEvent,
} from './failover/index.js'
export { protectStore } from './failover/index.js'
export type {
  DecisionInfo,
  HeaderFamilies,
  HttpLimiter,
  HttpLimiterOptions,
  HttpLogger,
  HttpOutcome,
  HttpRequestInfo,
  HttpResponseSpec,
  KeyKind,
  KeySpec,
  LimitedContext,
  QueueOptions,
  RateLimitBody,
  RateLimitBodyOptions,
  RouteOptions,
  Rule,
  StoreUnavailableStatus,
  TierOptions,
  TrustProxy,
} from './http/index.js'
export { createHttpLimiter, rateLimitBody, rateLimitHeaders } from './http/index.js'
export type {
  AcquireDecision,
  Check,
  ConsumeOptions,
  Decision,
  DecisionEvent,
  DecisionListener,
  DenyReason,
  LayeredDecision,
  Lease,
  Limiter,
  LimiterOptions,
} from './limiter.js'
export { createLimiter } from './limiter.js'
export type {
  AlgorithmName,
  ConcurrencyPolicy,
  Policy,
  PolicyScope,
  RatePolicy,
  ResolvedPolicy,
  StoreErrorMode,
} from './policy.js'
export { ALGORITHMS, resolvePolicy } from './policy.js'
export type { LocalDenyCacheOptions } from './scale/deny-cache.js'
export type { HybridBackend, HybridCounter } from './scale/hybrid.js'
export type { Step, StepResult, Store, SyncStore } from './store.js'
export type { MemoryStore, MemoryStoreOptions } from './stores/memory.js'
export { memoryStore } from './stores/memory.js'
export type {
  LayeredReserveDecision,
  LayeredWaitDecision,
  ReserveDecision,
  ReserveOptions,
  Settlement,
  Throttled,
  ThrottleOptions,
  WaitDecision,
  WaitingOptions,
  WaitOptions,
} from './waiting/types.js'
