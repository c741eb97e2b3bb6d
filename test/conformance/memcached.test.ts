// The shared conformance vectors against a real memcached (client clock: the only one it has).
import { afterAll } from 'vitest'
import { memcachedStore } from '../../packages/sluice/src/stores/memcached/index.js'
import { freshPrefix, memcachedClient } from '../helpers/memcached-clients.js'
import { runConformance } from './suite.js'

const client = memcachedClient()
afterAll(() => client.close())

runConformance(
  'memcached',
  (now) => memcachedStore(client, { clock: 'client', now, prefix: freshPrefix('conf') }),
  undefined,
  { records: false },
)
