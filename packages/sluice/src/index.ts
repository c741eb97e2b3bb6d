// Sluice: rate limiting for Node.js. The public entry point: what an application writes code
// against. What a store author needs is in `sluice/store`; each store and adapter has its subpath.

export type { Duration } from './duration.js'
export { parseDuration } from './duration.js'
export type { SluiceErrorCode } from './errors.js'
export {
  InvalidConfigError,
  InvalidCostError,
  InvalidDurationError,
  InvalidKeyError,
  InvalidListError,
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
  TooManyRecordsError,
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
  StoreHealth,
  StoreHealthEvent,
} from './failover/index.js'
export type {
  DecisionInfo,
  HeaderFamilies,
  HttpLimiter,
  HttpLimiterOptions,
  HttpLogger,
  HttpOutcome,
  HttpRequestInfo,
  HttpResponseInfo,
  HttpResponseSpec,
  KeyKind,
  KeySpec,
  LimitedContext,
  OutcomeCountingOptions,
  QueueOptions,
  RateLimitBody,
  RateLimitBodyOptions,
  RequestCost,
  RequestPolicy,
  RouteOptions,
  Rule,
  StoreUnavailableStatus,
  TierOptions,
  TrustProxy,
} from './http/index.js'
export { createHttpLimiter, ipKey, rateLimitBody, rateLimitHeaders } from './http/index.js'
export type { ListEntryOptions, PolicyLists } from './limiter/list-methods.js'
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
  Override,
  OverrideOptions,
  PenaltyApplied,
} from './limiter.js'
export { createLimiter, nearLimitCrossings } from './limiter.js'
export type { ListEntries, ListName } from './lists.js'
export type { PenaltyOptions, ResolvedPenalty } from './penalty.js'
export type {
  AlgorithmName,
  ConcurrencyPolicy,
  CostAboveCapacity,
  Policy,
  PolicyScope,
  RatePolicy,
  StoreErrorMode,
} from './policy.js'
export type { ListEntry, ListEntryKind } from './runtime-lists.js'
export type { LocalDenyCacheOptions } from './scale/deny-cache.js'
export type { HybridBackend, HybridStats, LeaseCall, LeaseReply } from './scale/hybrid.js'
export type { Store } from './store.js'
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
