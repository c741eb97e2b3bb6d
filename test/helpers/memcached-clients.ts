// memjs clients for the memcached tests, connected to the server the global setup started.
import memjs from 'memjs'
import { inject } from 'vitest'

const quiet = { log: () => {} }

/** A memjs client on the shared memcached; no retries (a test sees failures as they are). */
export function memcachedClient(address = inject('memcached').address): memjs.Client {
  return memjs.Client.create(address, { retries: 1, timeout: 1, logger: quiet })
}

let unique = 0
/** A key prefix no other test uses. */
export function freshPrefix(label: string): string {
  unique++
  return `t-${label}-${process.pid}-${unique}`
}
