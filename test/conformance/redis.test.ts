// The shared conformance vectors against Redis and Redis Cluster, client clock mode (deterministic).
import { afterAll } from 'vitest'
import { vectors } from '../../packages/sluice/src/conformance/vectors.js'
import { redisStore } from '../../packages/sluice/src/stores/redis/index.js'
import {
  freshPrefix,
  ioredis,
  ioredisCluster,
  nodeRedis,
  nodeRedisCluster,
} from '../helpers/redis-clients.js'
import { runConformance } from './suite.js'

const standalone = ioredis()
const cluster = ioredisCluster()
const nodeClient = nodeRedis()
const nodeCluster = nodeRedisCluster()

afterAll(async () => {
  standalone.disconnect()
  cluster.disconnect()
  await (await nodeClient).close()
  await (await nodeCluster).close()
})

runConformance('redis (ioredis)', (now) =>
  redisStore(standalone, { clock: 'client', now, prefix: freshPrefix('conf') }),
)
runConformance('redis cluster (ioredis)', (now) =>
  redisStore(cluster, { clock: 'client', now, prefix: freshPrefix('conf-c') }),
)
// node-redis: every other vector, standalone and cluster.
const subset = vectors.filter((_, i) => i % 2 === 0)
runConformance(
  'redis (node-redis)',
  async (now) => redisStore(await nodeClient, { clock: 'client', now, prefix: freshPrefix('conf-n') }),
  subset,
)
runConformance(
  'redis cluster (node-redis)',
  async (now) => redisStore(await nodeCluster, { clock: 'client', now, prefix: freshPrefix('conf-nc') }),
  subset,
)
