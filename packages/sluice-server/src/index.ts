// `sluice-server`: the decision service as a library, what `sluice serve` runs. Build a service
// from a config (`createService`), read and check configs, open a store from its URL, and read
// envoyproxy/ratelimit rule files.
export type { EnvoyRules } from './envoy/config.js'
export { describeEnvoyConfig, loadEnvoyConfig, parseEnvoyConfig } from './envoy/config.js'
export type { ChargeMode, EnvoySettings, GrpcSettings } from './envoy/settings.js'
export type { FailMode, PolicyEntry, ServiceConfig } from './server/config.js'
export { describeConfig, loadConfig, parseConfig } from './server/config.js'
export type { RegionsSettings } from './server/config-regions.js'
export type { TelemetrySettings } from './server/config-telemetry.js'
export type { ListenerTls } from './server/listener-tls.js'
export type { ClientErrorCode } from './server/requests.js'
export type { ListeningAddress, Service, ServiceOptions, StoreHandle } from './server/service.js'
export { createService } from './server/service.js'
export { openRegionStore } from './server/store-regions.js'
export type {
  ConnectionLogger,
  HostPort,
  OpenStoreOptions,
  SentinelSpec,
  StoreSpec,
  StoreTlsSettings,
} from './server/store-url.js'
export { openStore, parseStoreUrl } from './server/store-url.js'
export type { ServiceTelemetry, StartTelemetryOptions } from './server/telemetry.js'
export { startTelemetry } from './server/telemetry.js'
