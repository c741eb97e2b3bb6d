// `sluice/metrics`: Prometheus metrics, top keys, spike detection, abuse patterns and the live dashboard.

export type { Dashboard, DashboardOptions } from '../dashboard/handler.js'
export { createDashboard } from '../dashboard/handler.js'
export type {
  AbuseAlert,
  AbuseEntry,
  AbuseKeyKind,
  AbuseMemory,
  AbuseOptions,
  AbusePattern,
  AbuseReport,
} from './abuse.js'
export { AbuseDetector, networkOf } from './abuse.js'
export { DistinctSketch, HLL_STANDARD_ERROR, SKETCH_BYTES } from './hll.js'
export type {
  DashboardSnapshot,
  NodeHandler,
  Observability,
  ObservabilityOptions,
  PolicySnapshot,
  StoreSnapshot,
  TopKeysReport,
} from './observability.js'
export { createObservability } from './observability.js'
export type { CircuitState, MetricsOptions, Outcome, SluiceMetrics, StoreHealth } from './prometheus.js'
export { CIRCUIT_STATE_VALUE, countedLayers, createMetrics, OTHER_LABEL, outcomeOf } from './prometheus.js'
export { RateSeries, RecentSamples } from './series.js'
export type { Spike, SpikeDetectorOptions } from './spikes.js'
export { SpikeDetector } from './spikes.js'
export type { HeavyHitter, SlidingTopKOptions, TopKReport } from './topk.js'
export { DistinctCounter, keyFingerprint, SlidingTopK, SpaceSaving } from './topk.js'
