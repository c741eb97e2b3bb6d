// The `sluice/redis` entry: the Redis store, hybrid mode's backend and the multi-region store (which
// runs on Redis), their options and client types; nothing of the stores' internals.
export type {
  MultiRegionStore,
  MultiRegionStoreOptions,
  PolicyShare,
  RegionHealth,
} from '../multi-region/index.js'
export { multiRegionStore } from '../multi-region/index.js'
export type {
  HybridRedisOptions,
  IORedisClientLike,
  NodeRedisClientLike,
  NodeRedisClusterLike,
  RedisClient,
  RedisStore,
  RedisStoreOptions,
} from './index.js'
export { hybridRedis, redisStore, subjectTag } from './index.js'
