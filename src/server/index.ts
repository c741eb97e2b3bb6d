// `sluice/server`: the decision service as a library (what `sluice serve` runs).
export type { FailMode, PolicyEntry, ServiceConfig } from './config.js'
export { describeConfig, FAIL_MODES, limiterPolicies, loadConfig, parseConfig } from './config.js'
export type { ClientErrorCode } from './requests.js'
export type { ListeningAddress, Service, ServiceOptions, StoreHandle } from './service.js'
export { createService, memoryStoreHandle } from './service.js'
export type { HostPort, OpenStoreOptions, StoreSpec } from './store-url.js'
export { openStore, parseStoreUrl, redactStoreUrl } from './store-url.js'
