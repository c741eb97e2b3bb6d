// The `sluice/memcached` entry: the factory and its types, nothing of the store's internals.
export type { MemcachedStore, MemcachedStoreOptions, MemjsClientLike } from './index.js'
export { memcachedStore } from './index.js'
