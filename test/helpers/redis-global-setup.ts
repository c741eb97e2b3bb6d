// vitest globalSetup: one standalone Redis and one Redis Cluster per test run, shared by every test
// file through `inject('redis')` / `inject('redisCluster')`, and stopped whatever the outcome.
import type { TestProject } from 'vitest/node'
import { type RedisClusterServers, type RedisServer, startCluster, startRedis } from './redis-harness.js'

declare module 'vitest' {
  export interface ProvidedContext {
    redis: { port: number; url: string }
    redisCluster: { ports: number[]; nodes: { host: string; port: number }[] }
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let redis: RedisServer | undefined
  let cluster: RedisClusterServers | undefined
  const teardown = async () => {
    await Promise.all([redis?.stop(), cluster?.stop()])
  }
  try {
    ;[redis, cluster] = await Promise.all([startRedis(), startCluster()])
  } catch (error) {
    await teardown()
    throw error
  }
  project.provide('redis', { port: redis.port, url: redis.url })
  project.provide('redisCluster', { ports: cluster.ports, nodes: cluster.nodes })
  return teardown
}
