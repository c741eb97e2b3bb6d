// `sluice-server`: the decision service as a library, what `sluice serve` runs. Build a service
// from a config (`createService`), read and check configs, open a store from its URL, and read
// envoyproxy/ratelimit rule files.
export type { EnvoyRules } from './envoy/config.js'
export { describeEnvoyConfig, loadEnvoyConfig, parseEnvoyConfig } from './envoy/config.js'
export type { ChargeMode, EnvoySettings, GrpcSettings } from './envoy/settings.js'
export type { FailMode, PolicyEntry, ServiceConfig } from './server/config.js'
export { describeConfig, loadConfig, parseConfig } from './server/config.js'
export type { ClientErrorCode } from './server/requests.js'
export type { ListeningAddress, Service, ServiceOptions, StoreHandle } from './server/service.js'
export { createService } from './server/service.js'
export type {
  ConnectionLogger,
  HostPort,
  OpenStoreOptions,
  SentinelSpec,
  StoreSpec,
} from './server/store-url.js'
export { openStore, parseStoreUrl } from './server/store-url.js'
