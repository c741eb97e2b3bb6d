// `sluice/metrics`: Prometheus metrics, OpenTelemetry metrics and spans, top keys, spike detection,
// abuse patterns and the live dashboard. The factories and what they report; the data structures
// behind them (top-K, sketches, spike detector, series) stay inside.

export type { Dashboard, DashboardOptions } from '../dashboard/handler.js'
export { createDashboard } from '../dashboard/handler.js'
export type { ListSnapshot, PolicyListsSnapshot } from '../dashboard/lists.js'
export type { NodeHandler } from '../http/types.js'
export type {
  AbuseAlert,
  AbuseEntry,
  AbuseKeyKind,
  AbuseMemory,
  AbuseOptions,
  AbusePattern,
  AbuseReport,
} from './abuse.js'
export type { NearLimitKey } from './near-limit-keys.js'
export type {
  DashboardSnapshot,
  Observability,
  ObservabilityOptions,
  OtherPolicies,
  PolicySnapshot,
  StoreSnapshot,
  TopKeysReport,
} from './observability.js'
export { createObservability } from './observability.js'
export type {
  OpenTelemetryOptions,
  OtelAttributes,
  OtelAttributeValue,
  OtelHistogramLike,
  OtelMeterLike,
  OtelObservableCounterLike,
  OtelObservableResultLike,
  OtelSpanLike,
  OtelTracerLike,
  SluiceOpenTelemetry,
} from './opentelemetry.js'
export { createOpenTelemetry } from './opentelemetry.js'
export type { PenalisedKey } from './penalties.js'
export type {
  CircuitState,
  DecisionOutcome,
  MetricsOptions,
  PolicyShareStatus,
  RegionStatus,
  ReportedStoreHealth,
  SluiceMetrics,
} from './prometheus.js'
export { createMetrics } from './prometheus.js'
export type { Spike, SpikeDetectorOptions } from './spikes.js'
export type { HeavyHitter, SlidingTopKOptions, TopKReport } from './topk.js'
export { keyFingerprint } from './topk.js'
