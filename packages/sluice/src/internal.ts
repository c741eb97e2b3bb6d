// `sluice/internal`: what the sluice-server package shares with the library beyond the public API
// (policy resolution, option spelling checks, client address rules, the API-key hash, the test
// for an answer still to come). It is not
// for applications: no name here is a promise, and any release may change it. sluice-server
// depends on one exact version of sluice, so the two always agree.

export type { CalendarSpec } from './calendar.js'
export type { ClientIpResolver } from './http/ip.js'
export { clientIpResolver, groupIp, ipMatcher, parseIp } from './http/ip.js'
export { hashedApiKey } from './http/keys.js'
export { checkKnownKeys, closest, keysOf } from './options.js'
export type { RateAlgorithmName, ResolvedPolicy } from './policy.js'
export { resolvePolicy } from './policy.js'
export { isPending } from './store.js'
export { pingMemcached } from './stores/memcached/index.js'
