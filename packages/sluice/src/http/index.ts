// The framework-neutral HTTP layer: key extraction, layered rules, tiers, headers and 429 bodies.
export type { HttpLimiter } from './core.js'
export { asHttpLimiter, createHttpLimiter } from './core.js'
export type {
  HeaderFamilies,
  RateLimitBody,
  RateLimitBodyOptions,
  RateLimitHeaderOptions,
  StoreUnavailableStatus,
} from './headers.js'
export { headlineLayer, rateLimitBody, rateLimitHeaders, retryAfterSeconds } from './headers.js'
export type { ClientIpOptions, ClientIpResolver, TrustProxy } from './ip.js'
export { clientIpResolver, groupIp, ipMatcher, parseIp } from './ip.js'
export { ipKey } from './keys.js'
export type { QueueOptions } from './queue.js'
export type {
  DecisionInfo,
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
  RequestCost,
  RequestPolicy,
  RouteOptions,
  Rule,
  TierOptions,
} from './types.js'
