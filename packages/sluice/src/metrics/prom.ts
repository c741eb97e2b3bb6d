// prom-client, an optional peer of sluice: loaded when the first metrics are made, so importing
// sluice/metrics costs nothing without it and a missing install is named with its fix.
import { createRequire } from 'node:module'
import type * as PromClient from 'prom-client'
import { UnsupportedError } from '../errors.js'

let loaded: typeof PromClient | undefined

/** The prom-client module; `UnsupportedError` (SLUICE_UNSUPPORTED) with the install line when it is missing. */
export function promClient(): typeof PromClient {
  if (loaded !== undefined) return loaded
  try {
    loaded = createRequire(import.meta.url)('prom-client') as typeof PromClient
  } catch (error) {
    if ((error as { code?: string }).code === 'MODULE_NOT_FOUND' && String(error).includes("'prom-client'"))
      throw new UnsupportedError(
        'sluice/metrics needs prom-client (an optional peer): npm install prom-client',
      )
    throw error
  }
  return loaded
}
